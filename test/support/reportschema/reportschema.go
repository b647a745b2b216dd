// Package reportschema checks JSON reconciliation reports against their
// published JSON Schema (api/report.schema.json) with a maintained JSON
// Schema validator. Tests use it to hold every JSON report orderd makes
// to the schema finance systems code against; no product package imports
// it.
package reportschema

import (
	"bytes"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schemaURL is the name the schema is compiled under. The schema has no
// $id of its own (it is read beside openapi.json, wherever that is
// served), so its internal references resolve against this name.
const schemaURL = "urn:orderd:report.schema.json"

// Validator checks reports against one schema. It is safe for concurrent
// use.
type Validator struct {
	schema *jsonschema.Schema
}

// New compiles schema, the bytes of api/report.schema.json (api.ReportSchema
// returns them). Formats (date-time) are asserted, not only annotated, so
// a time that is not one fails.
func New(schema []byte) (*Validator, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, fmt.Errorf("report schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, fmt.Errorf("report schema: %w", err)
	}
	s, err := c.Compile(schemaURL)
	if err != nil {
		return nil, fmt.Errorf("report schema: %w", err)
	}
	return &Validator{schema: s}, nil
}

// Validate checks one JSON report. The error names every place where the
// report and the schema disagree.
func (v *Validator) Validate(report []byte) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(report))
	if err != nil {
		return fmt.Errorf("report is not JSON: %w", err)
	}
	if err := v.schema.Validate(doc); err != nil {
		return fmt.Errorf("report does not follow report.schema.json: %w", err)
	}
	return nil
}

// Package eventschema checks encoded events against the AsyncAPI document
// of orderd's events (api/asyncapi.yaml) with a maintained JSON Schema
// validator: the CloudEvents envelope against the payload schema of the
// message its type names, and its data against the schema its dataschema
// attribute points at. Tests use it to hold every event orderd publishes
// to the published contract.
package eventschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

// docURL is the name the document is compiled under; the schemas are
// found by JSON pointers into it, as dataschema's fragment gives them.
const docURL = "urn:orderd:asyncapi.json"

// Validator checks events against one AsyncAPI document. It is safe for
// concurrent use.
type Validator struct {
	mode     Mode
	compiler *jsonschema.Compiler
	// messages maps an event type to its message's key under
	// components/messages.
	messages map[string]string

	mu       sync.Mutex
	compiled map[string]*jsonschema.Schema
}

// Mode says how open the provider's shapes are.
type Mode int

// Modes of New.
const (
	// Published validates as the document is published: the provider's
	// order shapes accept fields the document does not name (the provider
	// may add them, and orderd republishes them verbatim).
	Published Mode = iota
	// Strict closes the provider's shapes too: every object schema that
	// declares properties and says nothing of others (the Order,
	// Transaction, Money ... schemas) refuses a field it does not name.
	// Tests use it on what orderd's own code and its faithful fake produce,
	// so a field orderd or the fake starts to send fails until the document
	// names it. Content the provider's specification does not show is
	// marked "additionalProperties: true" and stays open.
	Strict
)

// New compiles the AsyncAPI document doc (YAML) for validation in mode.
func New(doc []byte, mode Mode) (*Validator, error) {
	var tree any
	if err := yaml.Unmarshal(doc, &tree); err != nil {
		return nil, fmt.Errorf("asyncapi document: %w", err)
	}
	// Through JSON, so that numbers and maps are what the validator reads.
	j, err := json.Marshal(tree)
	if err != nil {
		return nil, fmt.Errorf("asyncapi document: %w", err)
	}
	root, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		return nil, fmt.Errorf("asyncapi document: %w", err)
	}
	top, _ := root.(map[string]any)
	comps, _ := top["components"].(map[string]any)
	schemas, _ := comps["schemas"].(map[string]any)
	msgs, _ := comps["messages"].(map[string]any)
	if len(schemas) == 0 || len(msgs) == 0 {
		return nil, errors.New("asyncapi document: no components/schemas or components/messages")
	}
	if mode == Strict {
		for _, s := range schemas {
			closeObjects(s)
		}
	}
	v := &Validator{mode: mode, messages: map[string]string{}, compiled: map[string]*jsonschema.Schema{}}
	for key, m := range msgs {
		mm, _ := m.(map[string]any)
		name, _ := mm["name"].(string)
		if name == "" {
			return nil, fmt.Errorf("asyncapi document: message %s has no name (its event type)", key)
		}
		if other, dup := v.messages[name]; dup {
			return nil, fmt.Errorf("asyncapi document: messages %s and %s both name type %s", other, key, name)
		}
		v.messages[name] = key
	}
	c := jsonschema.NewCompiler()
	// AsyncAPI 3.0's schema format is a superset of JSON Schema draft 7.
	c.DefaultDraft(jsonschema.Draft7)
	c.AssertFormat()
	if err := c.AddResource(docURL, root); err != nil {
		return nil, fmt.Errorf("asyncapi document: %w", err)
	}
	v.compiler = c
	// Compile every message now, so a broken schema fails at once.
	for _, key := range v.messages {
		if _, err := v.schema("/components/messages/" + key + "/payload"); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// closeObjects sets additionalProperties false on every object schema in s
// (and in the schemas it holds) that declares properties and says nothing
// of others. A member of an allOf is left open: it narrows the properties
// of a schema beside it (a finding's kind and detail) rather than listing
// them all.
func closeObjects(s any) {
	switch s := s.(type) {
	case map[string]any:
		if _, ok := s["properties"]; ok && isObjectType(s["type"]) {
			if _, set := s["additionalProperties"]; !set {
				s["additionalProperties"] = false
			}
		}
		for k, sub := range s {
			if all, ok := sub.([]any); ok && k == "allOf" {
				for _, member := range all {
					if m, ok := member.(map[string]any); ok {
						for _, inner := range m {
							closeObjects(inner)
						}
					}
				}
				continue
			}
			closeObjects(sub)
		}
	case []any:
		for _, sub := range s {
			closeObjects(sub)
		}
	}
}

func isObjectType(t any) bool {
	switch t := t.(type) {
	case string:
		return t == "object"
	case []any:
		for _, x := range t {
			if x == "object" {
				return true
			}
		}
	}
	return false
}

// Types lists the event types the document has a message for, sorted.
func (v *Validator) Types() []string {
	types := make([]string, 0, len(v.messages))
	for t := range v.messages {
		types = append(types, t)
	}
	sort.Strings(types)
	return types
}

func (v *Validator) schema(pointer string) (*jsonschema.Schema, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if s, ok := v.compiled[pointer]; ok {
		return s, nil
	}
	s, err := v.compiler.Compile(docURL + "#" + pointer)
	if err != nil {
		return nil, fmt.Errorf("asyncapi document: schema %s: %w", pointer, err)
	}
	v.compiled[pointer] = s
	return s, nil
}

// Check validates one encoded event (a CloudEvent in structured JSON
// mode, as orderd publishes it): the document must have a message named
// by its type, the whole event must match that message's payload, and its
// data must match the schema its dataschema's fragment points at. It
// returns the schema pointer the data was checked against.
func (v *Validator) Check(payload []byte) (pointer string, err error) {
	ev, err := jsonschema.UnmarshalJSON(bytes.NewReader(payload))
	if err != nil {
		return "", fmt.Errorf("event is not JSON: %w", err)
	}
	env, ok := ev.(map[string]any)
	if !ok {
		return "", errors.New("event is not a JSON object")
	}
	typ, _ := env["type"].(string)
	schemaAt := ""
	if key, ok := v.messages[typ]; ok {
		schemaAt = "/components/messages/" + key + "/payload"
	} else if v.mode == Published && strings.HasPrefix(typ, "order.") {
		// A status the provider's specification does not show is
		// published as order.<status> on the same channel, with the same
		// envelope and data (see the orderState channel).
		schemaAt = "/components/schemas/OrderEvent"
	} else {
		return "", fmt.Errorf("event type %q has no message in the asyncapi document", typ)
	}
	msg, err := v.schema(schemaAt)
	if err != nil {
		return "", err
	}
	if err := msg.Validate(ev); err != nil {
		return "", fmt.Errorf("event %s does not match %s: %w", typ, schemaAt, err)
	}
	ds, _ := env["dataschema"].(string)
	_, frag, found := strings.Cut(ds, "#")
	if !found || !strings.HasPrefix(frag, "/components/schemas/") {
		return "", fmt.Errorf("event %s: dataschema %q does not point into components/schemas", typ, ds)
	}
	data, err := v.schema(frag)
	if err != nil {
		return "", fmt.Errorf("event %s: dataschema %q: %w", typ, ds, err)
	}
	if err := data.Validate(env["data"]); err != nil {
		return "", fmt.Errorf("event %s: data does not match %s: %w", typ, frag, err)
	}
	return frag, nil
}

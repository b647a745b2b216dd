package api

import (
	_ "embed"
	"net/http"
)

// openAPI is the OpenAPI 3.1 document of the admin API, kept in the
// repository beside the code it describes.
//
//go:embed openapi.json
var openAPI []byte

// handleOpenAPI is GET /v1/openapi.json.
func (s *server) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(openAPI)
}

// asyncAPI is the AsyncAPI 3.0 document of the events orderd publishes to
// NATS; every event's dataschema points into it.
//
//go:embed asyncapi.yaml
var asyncAPI []byte

// AsyncAPI returns the AsyncAPI document of the events, as served at
// GET /v1/asyncapi.yaml, for tests and tools that check events against it.
func AsyncAPI() []byte { return append([]byte(nil), asyncAPI...) }

// handleAsyncAPI is GET /v1/asyncapi.yaml.
func (s *server) handleAsyncAPI(w http.ResponseWriter, r *http.Request) {
	// application/yaml is the media type RFC 9512 registers for YAML.
	w.Header().Set("Content-Type", "application/yaml; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(asyncAPI)
}

// reportSchema is the JSON Schema (draft 2020-12) of the JSON
// reconciliation report. openapi.json refers to it by the relative
// reference "report.schema.json", which resolves to this file in the
// repository and to GET /v1/report.schema.json when read from the server.
//
//go:embed report.schema.json
var reportSchema []byte

// ReportSchema returns the JSON Schema of the JSON reconciliation report,
// as served at GET /v1/report.schema.json, for tests and tools that check
// reports against it.
func ReportSchema() []byte { return append([]byte(nil), reportSchema...) }

// handleReportSchema is GET /v1/report.schema.json.
func (s *server) handleReportSchema(w http.ResponseWriter, r *http.Request) {
	// application/schema+json is the media type the JSON Schema
	// specification registers for schemas.
	w.Header().Set("Content-Type", "application/schema+json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(reportSchema)
}

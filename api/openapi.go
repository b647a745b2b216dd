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

package api_test

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"orderd/api"
)

// The contract check: every answer the tests of this package get from the
// admin API (env.do) is held to api/openapi.json. Its status must be one
// the operation declares (408, 421, 499 and 500 may fall to "default"), and a
// JSON body must match the schema declared for that status.

// docBase is the URL the document is compiled under, so that its relative
// reference to report.schema.json resolves as it does on a server.
const docBase = "http://orderd.invalid/v1/"

type openAPIDoc struct {
	Paths map[string]map[string]struct {
		OperationID string                     `json:"operationId"`
		Tags        []string                   `json:"tags"`
		Description string                     `json:"description"`
		Security    *[]map[string][]string     `json:"security"`
		Responses   map[string]json.RawMessage `json:"responses"`
	} `json:"paths"`
}

type contract struct {
	doc      openAPIDoc
	patterns []pathPattern
	compiler *jsonschema.Compiler

	mu       sync.Mutex
	compiled map[string]*jsonschema.Schema
}

type pathPattern struct {
	template string
	re       *regexp.Regexp
}

var (
	contractOnce sync.Once
	contractDoc  *contract
	contractErr  error
)

// loadContract reads and compiles api/openapi.json once per test binary.
func loadContract() (*contract, error) {
	contractOnce.Do(func() {
		raw, err := os.ReadFile("openapi.json")
		if err != nil {
			contractErr = err
			return
		}
		c := &contract{compiled: map[string]*jsonschema.Schema{}}
		if contractErr = json.Unmarshal(raw, &c.doc); contractErr != nil {
			return
		}
		for tmpl := range c.doc.Paths {
			re := regexp.MustCompile(`\\\{[^}]+\\\}`).ReplaceAllString(regexp.QuoteMeta(tmpl), `[^/]+`)
			c.patterns = append(c.patterns, pathPattern{template: tmpl, re: regexp.MustCompile("^" + re + "$")})
		}
		// Literal paths before templates: /v1/reports/files before
		// /v1/reports/files/{name}.
		sort.Slice(c.patterns, func(i, j int) bool {
			return strings.Count(c.patterns[i].template, "{") < strings.Count(c.patterns[j].template, "{")
		})
		comp := jsonschema.NewCompiler()
		comp.DefaultDraft(jsonschema.Draft2020)
		comp.AssertFormat()
		for name, b := range map[string][]byte{"openapi.json": raw, "report.schema.json": api.ReportSchema()} {
			v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
			if err != nil {
				contractErr = err
				return
			}
			if contractErr = comp.AddResource(docBase+name, v); contractErr != nil {
				return
			}
		}
		c.compiler = comp
		contractDoc = c
	})
	return contractDoc, contractErr
}

// schema compiles the schema at a JSON pointer of the document.
func (c *contract) schema(pointer string) (*jsonschema.Schema, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.compiled[pointer]; ok {
		return s, nil
	}
	s, err := c.compiler.Compile(docBase + "openapi.json#" + pointer)
	if err != nil {
		return nil, err
	}
	c.compiled[pointer] = s
	return s, nil
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// checkContract holds one answer to the document; see above.
func checkContract(t testing.TB, method, path string, r response) {
	t.Helper()
	c, err := loadContract()
	if err != nil {
		t.Fatalf("api/openapi.json: %v", err)
	}
	path, _, _ = strings.Cut(path, "?")
	tmpl := ""
	for _, p := range c.patterns {
		if p.re.MatchString(path) {
			tmpl = p.template
			break
		}
	}
	op, ok := c.doc.Paths[tmpl][strings.ToLower(method)]
	if !ok || (r.status == http.StatusNotFound && bytes.HasPrefix(r.body, []byte(`{"error":"no route `))) {
		// No such operation, or an optional one this server was built
		// without: the router's 404 or 405.
		return
	}
	status := strconv.Itoa(r.status)
	raw, declared := op.Responses[status]
	if !declared {
		switch r.status {
		case http.StatusRequestTimeout, http.StatusMisdirectedRequest, 499, http.StatusInternalServerError:
			raw, declared, status = op.Responses["default"], op.Responses["default"] != nil, "default"
		}
	}
	if !declared {
		t.Errorf("contract: %s %s answered %d, which api/openapi.json does not declare for %s %s: %s",
			method, path, r.status, method, tmpl, r.body)
		return
	}
	var resp struct {
		Content map[string]json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(raw, &resp); err != nil {
		t.Fatal(err)
	}
	mt, _, _ := mime.ParseMediaType(r.header.Get("Content-Type"))
	if mt != "application/json" || len(r.body) == 0 {
		return
	}
	if _, ok := resp.Content["application/json"]; !ok {
		t.Errorf("contract: %s %s answered %d in JSON, which api/openapi.json does not declare", method, path, r.status)
		return
	}
	ptr := "/paths/" + escapePointer(tmpl) + "/" + strings.ToLower(method) + "/responses/" + status + "/content/application~1json/schema"
	s, err := c.schema(ptr)
	if err != nil {
		t.Fatalf("contract: %s: %v", ptr, err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(r.body))
	if err != nil {
		t.Errorf("contract: %s %s answered %d with a body that is not JSON: %v", method, path, r.status, err)
		return
	}
	if err := s.Validate(v); err != nil {
		t.Errorf("contract: %s %s answered %d with a body that does not match api/openapi.json: %v\nbody: %s",
			method, path, r.status, err, r.body)
	}
}

// TestOpenAPI_operations: what generators need of every operation, and
// the token's 401 wherever the router asks for the token.
func TestOpenAPI_operations(t *testing.T) {
	c, err := loadContract()
	if err != nil {
		t.Fatal(err)
	}
	stub := http.NotFoundHandler()
	public := map[string]bool{}
	for _, rt := range api.RouteTable(api.Deps{Metrics: stub, Reports: stub, ReportFiles: stub, Dashboard: stub, Cluster: stubCluster{}}) {
		public[rt.Method+" "+rt.Pattern] = rt.Public
	}
	ids := map[string]string{}
	for path, ops := range c.doc.Paths {
		for method, op := range ops {
			name := strings.ToUpper(method) + " " + path
			if op.OperationID == "" {
				t.Errorf("%s has no operationId", name)
			} else if other, dup := ids[op.OperationID]; dup {
				t.Errorf("%s and %s share operationId %s", name, other, op.OperationID)
			}
			ids[op.OperationID] = name
			if len(op.Tags) == 0 {
				t.Errorf("%s has no tag", name)
			}
			if op.Description == "" {
				t.Errorf("%s has no description", name)
			}
			isPublic, served := public[name]
			if !served {
				continue // TestAPI_openAPI reports it
			}
			_, has401 := op.Responses["401"]
			openSecurity := op.Security != nil && len(*op.Security) == 0
			switch {
			case isPublic && (!openSecurity || has401):
				t.Errorf("%s needs no token: want security [] and no 401", name)
			case !isPublic && (openSecurity || !has401):
				t.Errorf("%s takes the admin token: want the bearer security and a 401", name)
			}
		}
	}
}

// TestOpenAPI_answers: the answers the issue found undeclared, each held
// to the document by env.do, and request bodies the gateway refuses are
// refused by the document's schema too.
func TestOpenAPI_answers(t *testing.T) {
	e := newEnv(t, setup{token: testToken})
	noToken := func(method, path string) {
		t.Helper()
		r := e.do(method, path, "", "Authorization", "")
		wantStatus(t, r, http.StatusUnauthorized)
	}
	noToken("GET", "/v1/cluster")
	noToken("POST", "/v1/outbox/resend")
	noToken("POST", "/v1/cluster/snapshot")

	c, err := loadContract()
	if err != nil {
		t.Fatal(err)
	}
	watch, err := c.schema("/components/schemas/WatchRequest")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, body string
		status     int
	}{
		{"order without state", `{"merchantOrderId":"w-1","type":"payin"}`, http.StatusUnprocessableEntity},
		{"order without merchantOrderId", `{"type":"payout","state":"created"}`, http.StatusUnprocessableEntity},
		{"order with an empty merchantOrderId", `{"merchantOrderId":"","type":"payin","state":"created"}`, http.StatusUnprocessableEntity},
		{"order with a requisiteId", `{"merchantOrderId":"w-1","type":"payin","state":"created","requisiteId":"0b7e6f4e-1f8a-4c55-9d1e-2a3b4c5d6e7f"}`, http.StatusUnprocessableEntity},
		{"requisite with a state", `{"type":"requisite","requisiteId":"0b7e6f4e-1f8a-4c55-9d1e-2a3b4c5d6e7f","state":"created"}`, http.StatusUnprocessableEntity},
		{"requisite without requisiteId", `{"type":"requisite"}`, http.StatusUnprocessableEntity},
		{"unknown type", `{"merchantOrderId":"w-1","type":"refund","state":"created"}`, http.StatusUnprocessableEntity},
		{"unknown field", `{"merchantOrderId":"w-1","type":"payin","state":"created","note":"x"}`, http.StatusBadRequest},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v, err := jsonschema.UnmarshalJSON(strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if watch.Validate(v) == nil {
				t.Errorf("WatchRequest accepts %s, which the gateway refuses", tt.body)
			}
			wantStatus(t, e.post("/v1/watch", tt.body), tt.status)
		})
	}
	// What the gateway takes, the schema takes.
	for _, body := range []string{
		`{"merchantOrderId":"w-2","type":"payin","state":"created"}`,
		`{"type":"requisite","requisiteId":"0b7e6f4e-1f8a-4c55-9d1e-2a3b4c5d6e7f","currency":"brl"}`,
	} {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if err := watch.Validate(v); err != nil {
			t.Errorf("WatchRequest refuses %s: %v", body, err)
		}
		wantStatus(t, e.post("/v1/watch", body), http.StatusAccepted)
	}
}

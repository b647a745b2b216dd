package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

// schemas validates an event's data against the schema its dataschema
// attribute names: a URL of orderd's AsyncAPI document (YAML) with a JSON
// pointer to the schema, e.g.
// http://127.0.0.1:8081/v1/asyncapi.yaml#/components/schemas/Order.
// The document is fetched once per URL and each schema compiled once.
type schemas struct {
	compiler *jsonschema.Compiler

	mu       sync.Mutex
	compiled map[string]*jsonschema.Schema
}

func newSchemas(token string) *schemas {
	c := jsonschema.NewCompiler()
	// The AsyncAPI document's schemas are JSON Schema draft 7.
	c.DefaultDraft(jsonschema.Draft7)
	c.AssertFormat()
	l := yamlLoader{token: token, client: &http.Client{Timeout: 10 * time.Second}}
	c.UseLoader(jsonschema.SchemeURLLoader{"http": l, "https": l})
	return &schemas{compiler: c, compiled: map[string]*jsonschema.Schema{}}
}

// validate checks data against the schema at dataschema.
func (s *schemas) validate(dataschema string, data json.RawMessage) error {
	if dataschema == "" {
		return fmt.Errorf("no dataschema attribute")
	}
	s.mu.Lock()
	sch, ok := s.compiled[dataschema]
	if !ok {
		var err error
		if sch, err = s.compiler.Compile(dataschema); err != nil {
			s.mu.Unlock()
			return err
		}
		s.compiled[dataschema] = sch
	}
	s.mu.Unlock()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("data: %w", err)
	}
	return sch.Validate(v)
}

// yamlLoader fetches a document over HTTP (with the admin token, when
// orderd's admin API has one) and reads it as YAML, which is how orderd
// serves its AsyncAPI document.
type yamlLoader struct {
	token  string
	client *http.Client
}

func (l yamlLoader) Load(url string) (any, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if l.token != "" {
		req.Header.Set("Authorization", "Bearer "+l.token)
	}
	resp, err := l.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	var doc any
	if err := yaml.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	// Through JSON, so that numbers and maps are what the validator reads.
	j, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(j))
}

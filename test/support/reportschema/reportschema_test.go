package reportschema_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"orderd/api"
	"orderd/test/support/reportschema"
)

func validator(t *testing.T) *reportschema.Validator {
	t.Helper()
	v, err := reportschema.New(api.ReportSchema())
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// goldenReports are the JSON reports the reconcile package's golden tests
// hold the reporter to.
func goldenReports(t *testing.T) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("..", "..", "..", "reconcile", "testdata", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatal("no golden JSON report in reconcile/testdata")
	}
	out := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(p)] = b
	}
	return out
}

// TestValidator_golden: the golden reports follow the published schema.
func TestValidator_golden(t *testing.T) {
	v := validator(t)
	for name, b := range goldenReports(t) {
		t.Run(name, func(t *testing.T) {
			if err := v.Validate(b); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestValidator_refuses: the schema is strict enough to catch what would
// break a finance system coding against it: a wrong type, a missing
// required field, an amount written as a number, a verdict it does not
// know, a field it does not name. Each case edits a valid report in one
// place; the unedited report passes, so a failure here is the edit's.
func TestValidator_refuses(t *testing.T) {
	v := validator(t)
	base := goldenReports(t)["report-2026-11-01.json"]
	if base == nil {
		t.Fatal("golden report-2026-11-01.json missing")
	}
	for _, tc := range []struct {
		name, want string
		edit       func(r map[string]any)
	}{
		{"digest missing", "digest", func(r map[string]any) { delete(r, "digest") }},
		{"period.to missing", "to", func(r map[string]any) { delete(obj(r, "period"), "to") }},
		{"orders not an array", "orders", func(r map[string]any) { r["orders"] = map[string]any{} }},
		{"count as a string", "comparisons", func(r map[string]any) {
			obj(cur(r, 0), "balance")["comparisons"] = "1"
		}},
		{"amount as a number", "grossAuthorized", func(r map[string]any) {
			obj(cur(r, 0), "payins")["grossAuthorized"] = 350.0
		}},
		{"amount that is not a decimal", "residual", func(r map[string]any) {
			obj(cur(r, 0), "bridge")["residual"] = "5,00"
		}},
		{"unknown verdict", "verdict", func(r map[string]any) { cur(r, 0)["verdict"] = "closed" }},
		{"bridge without other", "other", func(r map[string]any) {
			delete(obj(obj(cur(r, 0), "bridge"), "movements"), "other")
		}},
		{"break without priority", "priority", func(r map[string]any) {
			cur(r, 0)["breaks"].([]any)[0].(map[string]any)["priority"] = nil
		}},
		{"line without membership", "membership", func(r map[string]any) {
			delete(r["orders"].([]any)[0].(map[string]any), "membership")
		}},
		{"time without milliseconds", "foundAt", func(r map[string]any) {
			r["findings"].([]any)[0].(map[string]any)["foundAt"] = "2026-11-01T18:00:00Z"
		}},
		{"finding id as a string", "id", func(r map[string]any) {
			r["findings"].([]any)[0].(map[string]any)["id"] = "1"
		}},
		{"trail entry without by", "by", func(r map[string]any) {
			r["findings"].([]any)[0].(map[string]any)["trail"] = []any{
				map[string]any{"action": "acknowledge", "note": "", "at": "2026-11-01T19:00:00Z"}}
		}},
		{"a field the schema does not name", "surprise", func(r map[string]any) { cur(r, 1)["surprise"] = true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r map[string]any
			if err := json.Unmarshal(base, &r); err != nil {
				t.Fatal(err)
			}
			tc.edit(r)
			b, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			err = v.Validate(b)
			if err == nil {
				t.Fatalf("the schema accepts a report with %s", tc.name)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error does not name %q: %v", tc.want, err)
			}
		})
	}
	t.Run("not JSON", func(t *testing.T) {
		if err := v.Validate(bytes.TrimSuffix(base, []byte("}\n"))); err == nil {
			t.Error("a truncated report validates")
		}
	})
}

func obj(m map[string]any, key string) map[string]any { return m[key].(map[string]any) }

func cur(r map[string]any, i int) map[string]any {
	return r["currencies"].([]any)[i].(map[string]any)
}

package monitoring_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestRules_Runbook checks that every alert says how urgent it is, what
// it is about, and where its runbook paragraph is, and that the paragraph
// exists in RUNBOOK.md.
func TestRules_Runbook(t *testing.T) {
	runbook, err := os.ReadFile("../RUNBOOK.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := headingAnchors(string(runbook))
	alerts := 0
	for path := range ruleFiles(t) {
		for _, g := range readRules(t, path).Groups {
			for _, r := range g.Rules {
				if r.Alert == "" {
					continue
				}
				alerts++
				if s := r.Labels["severity"]; s != "page" && s != "ticket" {
					t.Errorf("%s: %s: severity %q, want page or ticket", path, r.Alert, s)
				}
				if strings.TrimSpace(r.Annotations["summary"]) == "" {
					t.Errorf("%s: %s has no summary", path, r.Alert)
				}
				want := "RUNBOOK.md#" + strings.ToLower(r.Alert)
				if got := r.Annotations["runbook_url"]; got != want {
					t.Errorf("%s: %s: runbook_url %q, want %q", path, r.Alert, got, want)
				}
				if p, ok := anchors[strings.ToLower(r.Alert)]; !ok {
					t.Errorf("RUNBOOK.md has no heading %q for %s's alert", r.Alert, path)
				} else if len(strings.Fields(p)) < 20 {
					t.Errorf("RUNBOOK.md: the paragraph of %s is %d words; say what it means and what to do", r.Alert, len(strings.Fields(p)))
				}
			}
		}
	}
	if alerts < 10 {
		t.Fatalf("only %d alerts found in the rule files", alerts)
	}
}

// TestRules_UnitTested checks that orderd.rules.test.yml makes every
// alert fire at least once, so that promtool test rules covers each.
func TestRules_UnitTested(t *testing.T) {
	b, err := os.ReadFile("orderd.rules.test.yml")
	if err != nil {
		t.Fatal(err)
	}
	var tests struct {
		RuleFiles []string `yaml:"rule_files"`
		Tests     []struct {
			AlertRuleTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal(b, &tests); err != nil {
		t.Fatal(err)
	}
	fired := map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fired[a.Alertname] = true
			}
		}
	}
	for _, path := range tests.RuleFiles {
		for _, g := range readRules(t, path).Groups {
			for _, r := range g.Rules {
				if r.Alert != "" && !fired[r.Alert] {
					t.Errorf("orderd.rules.test.yml: no test makes %s fire", r.Alert)
				}
			}
		}
	}
	for path, mode := range ruleFiles(t) {
		if mode == replicated && len(readRules(t, path).Groups) > 0 && !slices.Contains(tests.RuleFiles, path) {
			t.Errorf("%s has rules but orderd.rules.test.yml does not load it", path)
		}
	}
}

var heading = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *$`)

// headingAnchors maps each heading's GitHub anchor (lowercased, spaces to
// dashes, punctuation dropped) to the text up to the next heading.
func headingAnchors(md string) map[string]string {
	out := map[string]string{}
	locs := heading.FindAllStringSubmatchIndex(md, -1)
	for i, l := range locs {
		end := len(md)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		title := strings.ToLower(md[l[2]:l[3]])
		var b strings.Builder
		for _, r := range title {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
				b.WriteRune(r)
			}
		}
		out[b.String()] = md[l[1]:end]
	}
	return out
}

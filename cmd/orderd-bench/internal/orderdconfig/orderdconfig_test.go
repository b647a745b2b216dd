package orderdconfig

import (
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestYAML parses the configuration back and checks what the benchmarks
// rely on: the given paths and level, every schedule off, pprof only when
// asked for, and the extra section kept.
func TestYAML(t *testing.T) {
	for _, pprof := range []bool{false, true} {
		out := YAML(Options{PublicKey: "/k/p.pem", Database: "/d/orderd.db", NATSDir: "/d/nats", Level: "warn", Pprof: pprof,
			Extra: "reports:\n  dir: \"/d/reports\"\n"})
		var c struct {
			Provider struct {
				PublicKeys []string `yaml:"public_keys"`
			}
			Admin struct {
				Listen string
				Pprof  *bool
			}
			Store struct{ Path string }
			NATS  struct {
				Embedded struct {
					StoreDir string `yaml:"store_dir"`
				}
			} `yaml:"nats"`
			Reconcile struct{ Schedules map[string]string }
			Log       struct{ Level string }
			Reports   struct{ Dir string }
		}
		if err := yaml.Unmarshal([]byte(out), &c); err != nil {
			t.Fatalf("pprof=%v: %v\n%s", pprof, err, out)
		}
		if len(c.Provider.PublicKeys) != 1 || c.Provider.PublicKeys[0] != "/k/p.pem" || c.Store.Path != "/d/orderd.db" ||
			c.NATS.Embedded.StoreDir != "/d/nats" || c.Log.Level != "warn" || c.Reports.Dir != "/d/reports" || c.Admin.Listen != "127.0.0.1:0" {
			t.Errorf("pprof=%v: parsed %+v from\n%s", pprof, c, out)
		}
		if (c.Admin.Pprof != nil) != pprof {
			t.Errorf("pprof=%v: admin.pprof = %v", pprof, c.Admin.Pprof)
		}
		for _, job := range []string{"stale", "doubt", "balances", "requisites", "report"} {
			if c.Reconcile.Schedules[job] != "off" {
				t.Errorf("pprof=%v: schedule %s = %q, want off", pprof, job, c.Reconcile.Schedules[job])
			}
		}
	}
}

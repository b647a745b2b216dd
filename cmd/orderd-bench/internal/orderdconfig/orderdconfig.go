// Package orderdconfig writes the configuration orderd-bench's subcommands
// start "orderd run" with: every listener on a free loopback port, the
// given database, an embedded NATS server, every reconcile schedule off,
// and a provider that is never called.
package orderdconfig

import "fmt"

// Options are what differs between the subcommands' configurations.
type Options struct {
	PublicKey string // file listed under provider.public_keys
	Database  string // store.path
	NATSDir   string // nats.embedded.store_dir
	Level     string // log.level
	Pprof     bool   // admin.pprof: true; left out when false, so that a binary older than the key can be measured
	Extra     string // YAML appended at the end (whole top-level sections)
}

// YAML is the configuration for o.
func YAML(o Options) string {
	pprof := ""
	if o.Pprof {
		pprof = "  pprof: true\n"
	}
	return fmt.Sprintf(`provider:
  # Never called: every schedule is off and no creation is made.
  base_url: http://127.0.0.1:9
  api_key: unused-by-the-benchmark
  public_keys: [%q]
receiver:
  listen: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
%sstore:
  path: %q
nats:
  embedded:
    listen: 127.0.0.1:0
    store_dir: %q
reconcile:
  schedules: {stale: "off", doubt: "off", balances: "off", requisites: "off", report: "off"}
log:
  level: %s
  format: json
%s`, o.PublicKey, pprof, o.Database, o.NATSDir, o.Level, o.Extra)
}

// Package monitoring holds orderd's monitoring as files, not code: the
// Prometheus alerting rules (orderd.rules.yml, and replicated mode's in
// orderd-replicated.rules.yml), their promtool unit
// tests (orderd.rules.test.yml) and the Grafana dashboard
// (orderd-dashboard.json). Its Go tests check them against orderd itself:
// every metric name a rule or a panel uses is one a real orderd process
// exports, every orderd metric is watched somewhere, and every alert has
// its paragraph in RUNBOOK.md.
package monitoring

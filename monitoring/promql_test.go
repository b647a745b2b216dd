package monitoring_test

import (
	"slices"
	"testing"
)

// The extraction must find every metric a query reads, and nothing else,
// or the registry check below proves nothing.
func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`up{job="orderd"} == 0`, []string{"up"}},
		{`sum by (instance) (rate(orderd_webhooks_total{outcome=~"a|b"}[5m])) / sum by (instance) (rate(orderd_webhooks_total[5m])) > 0.05`,
			[]string{"orderd_webhooks_total"}},
		{`histogram_quantile(0.99, sum by (instance, le) (rate(orderd_webhook_ack_seconds_bucket[5m]))) > 2`,
			[]string{"orderd_webhook_ack_seconds_bucket"}},
		{`a_total > 0 unless on (instance) group_left (kind) b_total offset 5m`, []string{"a_total", "b_total"}},
		{`max without (instance) (x) and ignoring (job) sum(y[5m:1m])`, []string{"x", "y"}},
		{`sum(rate(m{instance=~"$instance"}[$__rate_interval])) by (le)`, []string{"m"}},
		{`label_values(orderd_nats_connected, instance)`, []string{"orderd_nats_connected"}},
		{`label_values(orderd_x{kind="a"}, kind)`, []string{"orderd_x"}},
		{`label_values(instance)`, nil},
		{`topk(5, count_values("v", build_info)) # a comment orderd_nope`, []string{"build_info"}},
		{`ALERTS{alertname=~"Orderd.*"}`, []string{"ALERTS"}},
		{`vector(1) + 1e3 - 0.5`, nil},
	} {
		if got := metricNames(tc.expr); !slices.Equal(got, tc.want) {
			t.Errorf("metricNames(%q) = %q, want %q", tc.expr, got, tc.want)
		}
	}
}

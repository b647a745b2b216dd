package api

import (
	"net/http"
	"slices"
	"strings"
)

// route is one entry of the registration table. Pattern is the path as the
// OpenAPI document writes it ("/v1/orders/{merchantOrderId}").
type route struct {
	Method  string
	Pattern string
	// Public routes need no bearer token.
	Public  bool
	Handler http.Handler
}

// routes is the registration table: every route the admin API serves.
// Optional handlers (metrics, reports, dashboard) are registered only when
// the daemon passes them; the dashboard and reports engineer adds nothing
// here but their handlers in Deps.
func (s *server) routes() []route {
	hf := func(f http.HandlerFunc) http.Handler { return f }
	rs := []route{
		{Method: "GET", Pattern: "/healthz", Public: true, Handler: hf(s.handleHealthz)},
		{Method: "GET", Pattern: "/readyz", Public: true, Handler: hf(s.handleReadyz)},
		{Method: "GET", Pattern: "/metrics", Public: true, Handler: s.metricsHandler()},
		{Method: "GET", Pattern: "/v1/openapi.json", Handler: hf(s.handleOpenAPI)},
		{Method: "GET", Pattern: "/v1/asyncapi.yaml", Handler: hf(s.handleAsyncAPI)},
		{Method: "GET", Pattern: "/v1/report.schema.json", Handler: hf(s.handleReportSchema)},

		{Method: "GET", Pattern: "/v1/orders", Handler: hf(s.handleListOrders)},
		{Method: "GET", Pattern: "/v1/orders/{merchantOrderId}", Handler: hf(s.handleGetOrder)},
		{Method: "GET", Pattern: "/v1/attempts", Handler: hf(s.handleListAttempts)},
		{Method: "GET", Pattern: "/v1/findings", Handler: hf(s.handleListFindings)},

		{Method: "POST", Pattern: "/v1/payins", Handler: hf(s.handlePayin)},
		{Method: "POST", Pattern: "/v1/payouts", Handler: hf(s.handlePayout)},
		{Method: "POST", Pattern: "/v1/refunds", Handler: hf(s.handleRefund)},
		{Method: "POST", Pattern: "/v1/requisites", Handler: hf(s.handleRequisite)},
		{Method: "POST", Pattern: "/v1/requisites/deactivate", Handler: hf(s.handleRequisiteDeactivate)},
		{Method: "POST", Pattern: "/v1/watch", Handler: hf(s.handleWatch)},
		{Method: "POST", Pattern: "/v1/outbox/resend", Handler: hf(s.handleOutboxResend)},
		{Method: "POST", Pattern: "/v1/findings/{id}", Handler: hf(s.handleFindingAction)},
	}
	if h := s.deps.Reports; h != nil {
		rs = append(rs, route{Method: "GET", Pattern: "/v1/reports/reconciliation", Handler: h})
	}
	if h := s.deps.ReportFiles; h != nil {
		rs = append(rs,
			route{Method: "GET", Pattern: ReportFilesPath, Handler: h},
			route{Method: "GET", Pattern: ReportFilesPath + "/{name}", Handler: h})
	}
	// Served in both modes: in single-node mode they say that replicated
	// mode is off rather than that no such route exists.
	rs = append(rs,
		route{Method: "GET", Pattern: "/v1/cluster", Handler: hf(s.handleCluster)},
		route{Method: "POST", Pattern: "/v1/cluster/snapshot", Handler: hf(s.handleClusterSnapshot)})
	if h := s.deps.Dashboard; h != nil {
		rs = append(rs, route{Method: "GET", Pattern: "/", Handler: h})
	}
	return rs
}

// handler registers the table on a ServeMux. Paths that exist under
// another method answer 405 with Allow; others 404; both in JSON.
func (s *server) handler() http.Handler {
	mux := http.NewServeMux()
	paths := http.NewServeMux()
	allow := map[string][]string{}
	for _, rt := range s.routes() {
		p := muxPath(rt.Pattern)
		h := rt.Handler
		if !rt.Public {
			h = s.requireToken(h)
		}
		mux.Handle(rt.Method+" "+p, h)
		if _, seen := allow[p]; !seen {
			pattern := p
			paths.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Allow", strings.Join(allow[pattern], ", "))
				s.fail(w, r, errMethodNotAllowed)
			})
		}
		allow[p] = append(allow[p], rt.Method)
		if rt.Method == "GET" {
			allow[p] = append(allow[p], "HEAD")
		}
	}
	for p := range allow {
		slices.Sort(allow[p])
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if h, pattern := paths.Handler(r); pattern != "" {
			h.ServeHTTP(w, r)
			return
		}
		s.fail(w, r, errRouteNotFound)
	})
	return mux
}

// muxPath turns an OpenAPI path into a ServeMux path: "/" must match only
// itself, not every path.
func muxPath(pattern string) string {
	if pattern == "/" {
		return "/{$}"
	}
	return pattern
}

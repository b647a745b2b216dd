// Package api will own orderd's admin HTTP API on the admin listener
// (admin.listen, default 127.0.0.1:8081): the health endpoints /healthz and
// /readyz, Prometheus metrics at /metrics, order queries
// (GET /v1/orders/{merchantOrderId}), the creation gateway (POST /v1/payins,
// /v1/payouts, /v1/refunds, /v1/requisites) that records every creation
// before calling the provider so that none is ever left in doubt,
// reconciliation reports (GET /v1/reports/reconciliation) and the dashboard
// at /.
//
// Every endpoint other than health and metrics takes
// "Authorization: Bearer <admin token>" when a token is configured. All
// routes are declared in one place and errors are mapped to HTTP statuses
// in one place.
package api

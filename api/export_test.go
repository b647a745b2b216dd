package api

// Routes returns "METHOD /pattern" for every route New registers with
// deps, read from the registration table itself.
func Routes(deps Deps) []string {
	s := &server{deps: deps}
	var out []string
	for _, r := range s.routes() {
		out = append(out, r.Method+" "+r.Pattern)
	}
	return out
}

// RouteInfo is one route of the registration table.
type RouteInfo struct {
	Method, Pattern string
	// Public routes need no bearer token.
	Public bool
}

// RouteTable returns the registration table New builds with deps.
func RouteTable(deps Deps) []RouteInfo {
	s := &server{deps: deps}
	var out []RouteInfo
	for _, r := range s.routes() {
		out = append(out, RouteInfo{Method: r.Method, Pattern: r.Pattern, Public: r.Public})
	}
	return out
}

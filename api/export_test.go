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

package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"orderd/store"
)

// readyBody is the answer of /readyz.
type readyBody struct {
	Status string `json:"status"`
	// Failing names the checks that failed, in order.
	Failing []string `json:"failing,omitempty"`
	// Checks maps each check's name to "ok" or its error.
	Checks map[string]string `json:"checks"`
	// Migrations lists the background migrations still running: orderd
	// is ready meanwhile, and this says how far each has come.
	Migrations []store.MigrationProgress `json:"migrations,omitempty"`
}

// storeCheck is the name of the store's readiness check.
const storeCheck = "store"

// handleHealthz is GET /healthz: the process is up and serving.
func (s *server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// handleReadyz is GET /readyz: the store can commit a write and every
// injected check passes. Each check runs with its own time bound; the
// answer names every check and its result, and 503 lists the failing ones.
func (s *server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	checks := make([]Check, 0, 1+len(s.deps.Checks))
	checks = append(checks, Check{Name: storeCheck, Check: s.deps.Store.Ready})
	checks = append(checks, s.deps.Checks...)
	body := readyBody{Status: "ready", Checks: make(map[string]string, len(checks))}
	for _, c := range checks {
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.ReadyTimeout)
		err := c.Check(ctx)
		cancel()
		if err != nil {
			body.Checks[c.Name] = err.Error()
			body.Failing = append(body.Failing, c.Name)
			continue
		}
		body.Checks[c.Name] = "ok"
	}
	if s.deps.Migrations != nil {
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.ReadyTimeout)
		ms, err := s.deps.Migrations(ctx)
		cancel()
		// Progress is detail: a failure to read it does not make orderd
		// unready (the store's own check says whether it can commit).
		for _, m := range ms {
			if err == nil && !m.Done {
				body.Migrations = append(body.Migrations, m)
			}
		}
	}
	if len(body.Failing) > 0 {
		s.log.Warn("not ready", "failing", body.Failing)
		s.fail(w, r, &notReadyError{checks: body.Checks, failed: body.Failing, migrations: body.Migrations})
		return
	}
	writeJSON(w, http.StatusOK, body)
}

// metricsHandler serves the daemon's registry, or 404 when none is wired.
func (s *server) metricsHandler() http.Handler {
	if s.deps.Metrics != nil {
		return s.deps.Metrics
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.fail(w, r, errRouteNotFound) })
}

// requireToken guards next with the bearer token when one is configured.
// Both sides are hashed before the constant-time comparison, so neither
// the token's content nor its length leaks through timing.
func (s *server) requireToken(next http.Handler) http.Handler {
	if s.cfg.Token == "" {
		return next
	}
	want := sha256.Sum256([]byte(s.cfg.Token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		got := sha256.Sum256([]byte(strings.TrimSpace(token)))
		if !ok || !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			s.fail(w, r, errUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

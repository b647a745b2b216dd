package api

import (
	"bytes"
	"net/http"
)

// resendBody answers POST /v1/outbox/resend.
type resendBody struct {
	Requeued int64 `json:"requeued"`
}

// handleOutboxResend is POST /v1/outbox/resend: every event the relay set
// aside because it could not be published as it is (event_not_published
// findings) is queued anew at the end of the outbox, once the limit that
// stopped it was raised. In replicated mode it goes through the log like
// any write, so any instance takes it. It takes no body, or an empty JSON
// object; a field is 400 naming it, not silently ignored.
func (s *server) handleOutboxResend(w http.ResponseWriter, r *http.Request) {
	body, err := s.readBody(w, r)
	if err == nil && len(bytes.TrimSpace(body)) > 0 {
		err = decodeStrict(body, &struct{}{})
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	n, err := s.deps.Store.RequeueSetAside(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("set-aside events queued anew", "events", n)
	writeJSON(w, http.StatusOK, resendBody{Requeued: n})
}

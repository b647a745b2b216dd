package api

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"html/template"
	"net/http"
	"net/url"
	"strings"

	"orderd/store"
)

//go:embed finding_form.html.tmpl
var findingFormHTML string

// parseFindingForm parses the page that answers a dashboard form the
// finding action refused. The template is embedded, so an error is a
// defect of this package that its tests catch.
func parseFindingForm() *template.Template {
	return template.Must(template.New("finding-form").Parse(findingFormHTML))
}

// findingFormPage is what the refused form's page shows: why, and the
// form again as the person filled it in.
type findingFormPage struct {
	ID, IDText         string
	Status             int
	StatusText         string
	Error, Field       string
	Action, Resolution string
	By, Note           string
	Actions            []string
	Resolutions        []string
	MaxBy, MaxNote     int
}

// failForm answers a refused action sent by the dashboard's form with an
// HTML page a person can read: what is wrong, which field, and the form
// again with what was typed, to correct and send. The status and the
// message are the ones the JSON API answers (s.fail stays the one place
// that maps errors to statuses; its answer is read back here).
func (s *server) failForm(w http.ResponseWriter, r *http.Request, body []byte, err error) {
	c := &capture{header: http.Header{}}
	s.fail(c, r, err)
	var eb errorBody
	if json.Unmarshal(c.body.Bytes(), &eb) != nil || eb.Error == "" {
		eb.Error = strings.TrimSpace(c.body.String())
	}
	typed, _ := url.ParseQuery(string(body))
	// What was typed is shown as text; bytes that are not UTF-8 (the
	// reason for some refusals) are shown as U+FFFD.
	field := func(name string) string { return strings.ToValidUTF8(typed.Get(name), "\uFFFD") }
	idText := r.PathValue("id")
	p := findingFormPage{
		ID: strings.ToValidUTF8(idText, "\uFFFD"), IDText: idText,
		Status: c.status, StatusText: http.StatusText(c.status),
		Error: strings.ToValidUTF8(eb.Error, "\uFFFD"), Field: eb.Field,
		Action: field("action"), Resolution: field("resolution"), By: field("by"), Note: field("note"),
		Actions: store.FindingActions, Resolutions: store.Resolutions,
		MaxBy: maxActorLen, MaxNote: maxNoteLen,
	}
	var buf bytes.Buffer
	if err := s.findingForm.Execute(&buf, p); err != nil {
		s.log.Error("render finding form", "err", err)
		writeJSON(w, http.StatusInternalServerError, errorBody{Error: "render finding form: " + err.Error()})
		return
	}
	h := w.Header()
	for k, v := range c.header {
		if k != "Content-Type" {
			h[k] = v
		}
	}
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
	w.WriteHeader(c.status)
	_, _ = w.Write(buf.Bytes())
}

// capture is a ResponseWriter that keeps an answer instead of sending it.
type capture struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (c *capture) Header() http.Header { return c.header }

func (c *capture) WriteHeader(status int) {
	if c.status == 0 {
		c.status = status
	}
}

func (c *capture) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	return c.body.Write(b)
}

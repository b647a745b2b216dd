package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"orderd/store"
)

// openFinding opens a finding of kind (stuck_order) about key and
// returns its id.
func (e *env) openFinding(kind, key string) int64 {
	e.t.Helper()
	var id int64
	err := e.store.Write(e.t.Context(), func(tx *store.Tx) error {
		var err error
		// The detail a stuck_order finding has (see reconcile/stale.go).
		id, _, err = tx.OpenFinding(kind, key, map[string]any{"orderId": key, "merchantOrderId": "m-" + key,
			"type": "payin", "status": "processing", "lastChangeAt": "2026-11-01T10:00:00Z", "checkAttempts": 3,
			"giveUpAfter": "24h0m0s"})
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

func TestAPI_findingAction(t *testing.T) {
	e := newEnv(t, setup{token: "s3cret"})
	id := e.openFinding(store.FindingStuckOrder, "o-1")
	path := fmt.Sprintf("/v1/findings/%d", id)

	steps := []struct {
		name, body string
		status     int
		// field is the field a 400 names; wantStatus the finding's status
		// after a 200.
		field, wantStatus string
	}{
		{"no action", `{"by":"ana"}`, 400, "action", ""},
		{"unknown action", `{"action":"close","by":"ana"}`, 400, "action", ""},
		{"no by", `{"action":"acknowledge"}`, 400, "by", ""},
		{"unknown field", `{"action":"acknowledge","by":"ana","reason":"x"}`, 400, "reason", ""},
		// A value of the wrong JSON type is a bad request naming the
		// field, as docs/http-api.md says, not the gateway's 422.
		{"action a number", `{"action":1,"by":"ana"}`, 400, "action", ""},
		{"by an object", `{"action":"acknowledge","by":{"name":"ana"}}`, 400, "by", ""},
		{"note a boolean", `{"action":"acknowledge","by":"ana","note":true}`, 400, "note", ""},
		{"resolution without resolve", `{"action":"acknowledge","by":"ana","resolution":"fixed"}`, 400, "resolution", ""},
		{"reopen an open finding", `{"action":"reopen","by":"ana"}`, 409, "", ""},
		{"acknowledge", `{"action":"acknowledge","by":"ana","note":"looking at it"}`, 200, "", "acknowledged"},
		{"acknowledge twice", `{"action":"acknowledge","by":"bo"}`, 409, "", ""},
		{"resolve without resolution", `{"action":"resolve","by":"ana","note":"settled"}`, 400, "resolution", ""},
		{"resolve with an unknown resolution", `{"action":"resolve","by":"ana","note":"x","resolution":"ignored"}`, 400, "resolution", ""},
		{"resolve without a note", `{"action":"resolve","by":"ana","resolution":"fixed"}`, 400, "note", ""},
		{"resolve", `{"action":"resolve","by":"ana","note":"provider support completed it","resolution":"fixed"}`, 200, "", "resolved"},
		{"resolve a resolved finding", `{"action":"resolve","by":"bo","note":"again","resolution":"explained"}`, 409, "", ""},
		{"reopen", `{"action":"reopen","by":"bo","note":"still processing at the provider"}`, 200, "", "open"},
		{"resolve again", `{"action":"resolve","by":"bo","note":"written off with the provider","resolution":"written_off"}`, 200, "", "resolved"},
	}
	for _, st := range steps {
		r := e.do("POST", path, st.body)
		if r.status != st.status {
			t.Fatalf("%s: status %d, want %d: %s", st.name, r.status, st.status, r.body)
		}
		m := r.json(t)
		switch st.status {
		case 400:
			if m["field"] != st.field {
				t.Errorf("%s: field %v, want %q (%s)", st.name, m["field"], st.field, r.body)
			}
			if msg, _ := m["error"].(string); !strings.Contains(msg, st.field) {
				t.Errorf("%s: error %q does not name %s", st.name, msg, st.field)
			}
		case 200:
			if m["status"] != st.wantStatus {
				t.Errorf("%s: status %v, want %s", st.name, m["status"], st.wantStatus)
			}
		}
	}

	// The trail has every action that applied, in order, with who and why.
	var f store.Finding
	r := e.do("POST", path, `{"action":"reopen","by":"cy","note":"one more look"}`)
	wantStatus(t, r, http.StatusOK)
	if err := json.Unmarshal(r.body, &f); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range f.Trail {
		if a.At.IsZero() {
			t.Errorf("trail entry without a time: %+v", a)
		}
		got = append(got, strings.Join([]string{a.Action, a.By, a.Resolution, a.Note}, "/"))
	}
	want := "acknowledge/ana//looking at it resolve/ana/fixed/provider support completed it " +
		"reopen/bo//still processing at the provider resolve/bo/written_off/written off with the provider reopen/cy//one more look"
	if strings.Join(got, " ") != want {
		t.Errorf("trail = %q\nwant    %q", strings.Join(got, " "), want)
	}
	// The listing shows the same trail.
	r = e.get("/v1/findings?state=all")
	if !strings.Contains(string(r.body), `"resolution":"written_off","at":`) {
		t.Errorf("listing lacks the trail: %s", r.body)
	}

	// Each action that applied sent one event on reconcile.stuck_order,
	// with distinct ids; the refused ones sent none.
	evs, err := e.store.PendingEvents(t.Context(), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	var n int
	for _, ev := range evs {
		if ev.Type == "reconcile.stuck_order" && ev.Subject == "reconcile.stuck_order" {
			n++
			ids[ev.ID] = true
		}
	}
	if n != 6 || len(ids) != 6 { // opened, then five actions
		t.Errorf("stuck_order events = %d (%d ids), want 6", n, len(ids))
	}

	// curl -d sends JSON as a form's Content-Type: still JSON.
	r = e.do("POST", path, `{"action":"resolve","by":"cy","note":"by curl","resolution":"fixed"}`,
		"Content-Type", "application/x-www-form-urlencoded")
	wantStatus(t, r, http.StatusOK)

	// Unknown id, a bad id, no token.
	wantStatus(t, e.do("POST", "/v1/findings/999", `{"action":"acknowledge","by":"ana"}`), http.StatusNotFound)
	wantStatus(t, e.do("POST", "/v1/findings/abc", `{"action":"acknowledge","by":"ana"}`), http.StatusBadRequest)
	wantStatus(t, e.do("POST", path, `{"action":"resolve","by":"ana","note":"x","resolution":"fixed"}`, "Authorization", ""), http.StatusUnauthorized)
}

// TestAPI_findingAction_reopenWhileAnotherIsOpen: a subject has at most
// one open finding, so reopening an old one beside a new one is refused.
func TestAPI_findingAction_reopenWhileAnotherIsOpen(t *testing.T) {
	e := newEnv(t, setup{})
	old := e.openFinding(store.FindingStuckOrder, "o-1")
	wantStatus(t, e.do("POST", fmt.Sprintf("/v1/findings/%d", old),
		`{"action":"resolve","by":"ana","note":"done","resolution":"fixed"}`), http.StatusOK)
	err := e.store.Write(t.Context(), func(tx *store.Tx) error {
		_, _, err := tx.OpenFinding(store.FindingStuckOrder, "o-1", map[string]any{"orderId": "o-1", "merchantOrderId": "m-o-1",
			"type": "payin", "status": "new", "lastChangeAt": "2026-11-02T10:00:00Z", "checkAttempts": 9, "giveUpAfter": "24h0m0s"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	r := e.do("POST", fmt.Sprintf("/v1/findings/%d", old), `{"action":"reopen","by":"ana"}`)
	wantStatus(t, r, http.StatusConflict)
}

// TestAPI_findingAction_reopenedIsUnacknowledged: a finding acknowledged,
// then resolved (by a person or by the reconciler), then reopened is open
// and unacknowledged, so a person can acknowledge it again; its trail
// keeps every action.
func TestAPI_findingAction_reopenedIsUnacknowledged(t *testing.T) {
	for _, tc := range []struct {
		name    string
		resolve func(e *env, id int64)
		trail   string
	}{
		{"resolved by a person", func(e *env, id int64) {
			wantStatus(t, e.do("POST", fmt.Sprintf("/v1/findings/%d", id),
				`{"action":"resolve","by":"ana","note":"done","resolution":"fixed"}`), http.StatusOK)
		}, "acknowledge/ana resolve/ana reopen/bo acknowledge/bo"},
		{"resolved by the reconciler", func(e *env, id int64) {
			err := e.store.Write(t.Context(), func(tx *store.Tx) error {
				_, err := tx.ResolveFinding(store.FindingStuckOrder, "o-1")
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		}, "acknowledge/ana reopen/bo acknowledge/bo"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, setup{})
			id := e.openFinding(store.FindingStuckOrder, "o-1")
			path := fmt.Sprintf("/v1/findings/%d", id)
			wantStatus(t, e.do("POST", path, `{"action":"acknowledge","by":"ana","note":"mine"}`), http.StatusOK)
			tc.resolve(e, id)
			r := e.do("POST", path, `{"action":"reopen","by":"bo","note":"not settled"}`)
			wantStatus(t, r, http.StatusOK)
			var f store.Finding
			if err := json.Unmarshal(r.body, &f); err != nil {
				t.Fatal(err)
			}
			if f.Status != store.StatusOpen || f.State != store.StatusOpen || f.AcknowledgedAt != nil || f.ResolvedAt != nil {
				t.Fatalf("reopened finding: status %s, state %s, acknowledgedAt %v, resolvedAt %v; want open, unacknowledged",
					f.Status, f.State, f.AcknowledgedAt, f.ResolvedAt)
			}
			// The listing of open findings shows it as open too.
			if r := e.get("/v1/findings?state=open"); !strings.Contains(string(r.body), `"status":"open"`) {
				t.Errorf("listing of open findings: %s", r.body)
			}
			r = e.do("POST", path, `{"action":"acknowledge","by":"bo","note":"on it again"}`)
			wantStatus(t, r, http.StatusOK)
			if err := json.Unmarshal(r.body, &f); err != nil {
				t.Fatal(err)
			}
			if f.Status != store.StatusAcknowledged {
				t.Errorf("after acknowledging again: status %s, want acknowledged", f.Status)
			}
			var got []string
			for _, a := range f.Trail {
				got = append(got, a.Action+"/"+a.By)
			}
			if strings.Join(got, " ") != tc.trail {
				t.Errorf("trail = %q, want %q", strings.Join(got, " "), tc.trail)
			}
		})
	}
}

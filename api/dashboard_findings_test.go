package api_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"orderd/store"
)

// post sends body with contentType and the server's token; redirects are
// not followed, so a form's 303 is seen as such.
func (s *reportServer) post(t testing.TB, path, contentType, body string) response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Content-Type", contentType)
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

const formType = "application/x-www-form-urlencoded"

// findingID returns the id of the finding of kind about key.
func (s *reportServer) findingID(t *testing.T, kind, key string) int64 {
	t.Helper()
	fs, err := s.st.FindingsPage(t.Context(), store.FindingQuery{Kind: kind, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		if f.Key == key {
			return f.ID
		}
	}
	t.Fatalf("no %s finding about %s", kind, key)
	return 0
}

// TestDashboard_resolvedFindings: a finding resolved from the dashboard
// stays in sight, in the recently resolved table with its resolution,
// who, and every action of its trail; one the reconciler resolved by
// itself says so.
func TestDashboard_resolvedFindings(t *testing.T) {
	s := newReportServer(t, testToken)
	html := string(s.get(t, "GET", "/").body)
	// newReportServer's usd drift was explained by a later check.
	usd := s.findingID(t, store.FindingBalanceDrift, "usd")
	row := tableRow(t, html, fmt.Sprintf("resolved-%d", usd))
	for _, want := range []string{"balance_drift", "usd", "by the reconciler", "no action by a person"} {
		if !strings.Contains(row, want) {
			t.Errorf("the reconciler's resolution lacks %q: %s", want, row)
		}
	}

	brl := s.findingID(t, store.FindingBalanceDrift, "brl")
	path := fmt.Sprintf("/v1/findings/%d", brl)
	for _, form := range []url.Values{
		{"action": {"acknowledge"}, "by": {"ana"}, "note": {"checking the statement"}},
		{"action": {"resolve"}, "by": {"ana"}, "note": {"provider fee, credit note 7731"}, "resolution": {"written_off"}},
	} {
		if r := s.post(t, path, formType, form.Encode()); r.status != http.StatusSeeOther {
			t.Fatalf("%s from the form: %d %s", form.Get("action"), r.status, r.body)
		}
	}
	html = string(s.get(t, "GET", "/").body)
	if strings.Contains(html, fmt.Sprintf(`id="finding-%d"`, brl)) {
		t.Error("the resolved finding is still among the open ones")
	}
	ids := regexp.MustCompile(`<tr id="resolved-(\d+)">`).FindAllStringSubmatch(html, -1)
	if len(ids) != 2 || ids[0][1] != fmt.Sprint(brl) || ids[1][1] != fmt.Sprint(usd) {
		t.Fatalf("resolved rows %q, want the brl drift (just resolved) then the usd one", ids)
	}
	row = tableRow(t, html, fmt.Sprintf("resolved-%d", brl))
	for _, want := range []string{
		"<td>written_off</td><td>ana</td>",
		"acknowledge by ana: checking the statement</li>",
		"resolve (written_off) by ana: provider fee, credit note 7731</li>",
	} {
		if !strings.Contains(row, want) {
			t.Errorf("the resolved brl drift lacks %q: %s", want, row)
		}
	}
}

// TestDashboard_unlistedFindings: with more open findings than the table
// shows, the page says how many it leaves out and links a page that
// lists them all.
func TestDashboard_unlistedFindings(t *testing.T) {
	s := newReportServer(t, testToken)
	// Two are open already (the brl drift and the quarantined webhook).
	err := s.st.Write(t.Context(), func(tx *store.Tx) error {
		for i := range 11 {
			if _, _, err := tx.OpenFinding(store.FindingStuckOrder, fmt.Sprintf("o-%02d", i), map[string]any{"orderId": i}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	html := string(s.get(t, "GET", "/").body)
	if n := strings.Count(html, `<tr id="finding-`); n != 10 {
		t.Errorf("%d open findings listed, want 10", n)
	}
	for _, want := range []string{
		`<strong>10 of 13 open findings are listed</strong> (the oldest); 3 are not.`,
		`<a href="/?findings=all#work-findings">List all 13</a>`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("dashboard lacks %q", want)
		}
	}
	all := string(s.get(t, "GET", "/?findings=all").body)
	if n := strings.Count(all, `<tr id="finding-`); n != 13 {
		t.Errorf("?findings=all lists %d open findings, want 13", n)
	}
	if strings.Contains(all, `id="findings-unlisted"`) {
		t.Error("?findings=all still says findings are left out")
	}
}

// tableRow returns the <tr> with id, markup included.
func tableRow(t *testing.T, html, id string) string {
	t.Helper()
	start := strings.Index(html, `<tr id="`+id+`">`)
	if start < 0 {
		t.Fatalf("no row %s in:\n%s", id, html)
	}
	end := strings.Index(html[start:], "</tr>")
	return html[start : start+end]
}

// TestFindingAction_formError: a form the finding action refuses is
// answered with an HTML page that says what is wrong and which field, with
// the JSON API's status, and gives the form back as it was filled in; the
// finding is unchanged.
func TestFindingAction_formError(t *testing.T) {
	s := newReportServer(t, testToken)
	brl := s.findingID(t, store.FindingBalanceDrift, "brl")
	path := fmt.Sprintf("/v1/findings/%d", brl)
	for _, tc := range []struct {
		name, path, body string
		status           int
		want             []string
	}{
		{"resolve without a note", path, "action=resolve&resolution=written_off&by=ana+%3Cb%3E&note=", http.StatusBadRequest, []string{
			"note is required with action resolve",
			"The field in question: <strong>note</strong>",
			// What was typed, as text: markup is not markup.
			`<input id="by" name="by" value="ana &lt;b&gt;"`,
			`<option value="resolve" selected>resolve</option>`,
			`<option value="written_off" selected>written_off</option>`,
			`<label for="note" class="wrong">`,
		}},
		{"a note that is not UTF-8", path, "action=resolve&resolution=fixed&by=ana&note=caf%E9", http.StatusBadRequest, []string{
			"note must be valid UTF-8",
			`<input id="note" name="note" value="caf` + "\uFFFD" + `"`,
			`<option value="fixed" selected>fixed</option>`,
		}},
		{"a control character in by", path, "action=acknowledge&by=ana%07&note=looking", http.StatusBadRequest, []string{
			"by must not contain control characters",
			`value="looking"`,
		}},
		{"an unknown field", path, "action=acknowledge&by=ana&reason=x", http.StatusBadRequest, []string{
			`unknown field &#34;reason&#34;`,
			`<input id="by" name="by" value="ana"`,
		}},
		{"an unknown finding", "/v1/findings/9999", "action=acknowledge&by=ana&note=x", http.StatusNotFound, []string{
			"no finding 9999",
			`action="/v1/findings/9999"`,
		}},
		{"an action that does not apply", path, "action=reopen&by=ana&note=again", http.StatusConflict, []string{
			"does not apply",
			`<option value="reopen" selected>reopen</option>`,
			`value="again"`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.post(t, tc.path, formType, tc.body)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			if ct := r.header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
				t.Errorf("Content-Type %q, want an HTML page", ct)
			}
			html := string(r.body)
			for _, want := range append(tc.want, "was not taken", `<a href="/#work-findings">Back to the dashboard</a>`) {
				if !strings.Contains(html, want) {
					t.Errorf("page lacks %q:\n%s", want, html)
				}
			}
		})
	}
	fs, err := s.st.FindingsPage(t.Context(), store.FindingQuery{Kind: store.FindingBalanceDrift, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		if f.ID == brl && (f.Status != store.StatusOpen || len(f.Trail) != 0) {
			t.Errorf("the refused forms changed the finding: %s, trail %+v", f.Status, f.Trail)
		}
	}
}

// TestFindingAction_formAndJSONAgree: the dashboard's form and the JSON
// API hold a finding action to the same rules (UTF-8, no control
// characters, the same lengths in characters), refuse the same input with
// the same status and field, and store the same text the same way.
func TestFindingAction_formAndJSONAgree(t *testing.T) {
	s := newReportServer(t, testToken)
	n := 0
	// fresh opens a finding nobody has acted on, for one action.
	fresh := func() string {
		t.Helper()
		n++
		var id int64
		err := s.st.Write(t.Context(), func(tx *store.Tx) error {
			var err error
			id, _, err = tx.OpenFinding(store.FindingStuckOrder, fmt.Sprintf("agree-%d", n), map[string]any{"orderId": n})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("/v1/findings/%d", id)
	}
	for _, tc := range []struct {
		name  string
		by    string
		note  string
		field string // the field a 400 names; "" for an action taken
	}{
		{"by not UTF-8", "an\xe9", "x", "by"},
		{"note not UTF-8", "ana", "caf\xe9", "note"},
		{"NUL in by", "ana\x00", "x", "by"},
		{"newline in note", "ana", "line one\nline two", "note"},
		{"DEL in note", "ana", "x\x7f", "note"},
		{"by of 201 characters", strings.Repeat("é", 201), "x", "by"},
		{"note of 4001 characters", "ana", strings.Repeat("ü", 4001), "note"},
		// At the bounds, in characters: 200 two-byte characters are 400
		// bytes, and pass.
		{"by of 200 characters", strings.Repeat("é", 200), "x", ""},
		{"note of 4000 characters", "ana", strings.Repeat("ü", 4000), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fb := url.Values{"action": {"acknowledge"}, "by": {tc.by}, "note": {tc.note}}.Encode()
			fr := s.post(t, fresh(), formType, fb)
			// A JSON body must be UTF-8 as a whole (a bad byte is refused
			// before any field is read), so the JSON case of a bad byte is
			// its escape, which the decoder would read as U+FFFD: the
			// form, which carries the byte itself, must refuse it rather
			// than store it.
			jb, _ := json.Marshal(map[string]string{"action": "acknowledge", "by": tc.by, "note": tc.note})
			jr := s.post(t, fresh(), "application/json", string(jb))
			if tc.field == "" {
				if fr.status != http.StatusSeeOther || jr.status != http.StatusOK {
					t.Fatalf("form %d (want 303), json %d (want 200): %s %s", fr.status, jr.status, fr.body, jr.body)
				}
				return
			}
			if fr.status != http.StatusBadRequest || !strings.Contains(string(fr.body), "<strong>"+tc.field+"</strong>") {
				t.Errorf("form: %d, want 400 naming %s:\n%s", fr.status, tc.field, fr.body)
			}
			if utf8.ValidString(tc.by + tc.note) {
				var eb struct{ Field string }
				_ = json.Unmarshal(jr.body, &eb)
				if jr.status != http.StatusBadRequest || eb.Field != tc.field {
					t.Errorf("json: %d field %q, want 400 naming %s: %s", jr.status, eb.Field, tc.field, jr.body)
				}
			}
		})
	}

	// The same text, through either door, is stored as the same bytes.
	const note = "Zahlung geprüft — ticket «7731» ✓"
	viaForm, viaJSON := fresh(), fresh()
	if r := s.post(t, viaForm, formType, url.Values{"action": {"acknowledge"}, "by": {"José"}, "note": {note}}.Encode()); r.status != http.StatusSeeOther {
		t.Fatalf("form: %d %s", r.status, r.body)
	}
	if r := s.post(t, viaJSON, "application/json", `{"action":"acknowledge","by":"José","note":"`+note+`"}`); r.status != http.StatusOK {
		t.Fatalf("json: %d %s", r.status, r.body)
	}
	for _, path := range []string{viaForm, viaJSON} {
		var id int64
		fmt.Sscanf(path, "/v1/findings/%d", &id)
		f := findingByID(t, s, id)
		if len(f.Trail) != 1 || f.Trail[0].By != "José" || f.Trail[0].Note != note {
			t.Errorf("%s trail %+v: want by José and the note as sent", path, f.Trail)
		}
	}
}

func findingByID(t *testing.T, s *reportServer, id int64) store.Finding {
	t.Helper()
	fs, err := s.st.FindingsPage(t.Context(), store.FindingQuery{AfterID: id - 1, Limit: 1})
	if err != nil || len(fs) != 1 || fs[0].ID != id {
		t.Fatalf("finding %d: %v %+v", id, err, fs)
	}
	return fs[0]
}

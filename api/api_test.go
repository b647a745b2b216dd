package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"orderd/api"
	"orderd/provider"
	"orderd/store"
)

func TestAPI_auth(t *testing.T) {
	e := newEnv(t, setup{token: testToken,
		metrics: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "orderd_up 1") })})
	tests := []struct {
		name   string
		method string
		path   string
		auth   string // the Authorization header; "-" sends none
		status int
	}{
		{"no token", "GET", "/v1/orders/x", "-", 401},
		{"wrong token", "GET", "/v1/orders/x", "Bearer nope", 401},
		{"token of another length", "GET", "/v1/orders/x", "Bearer " + testToken + "x", 401},
		{"wrong scheme", "GET", "/v1/orders/x", "Basic " + testToken, 401},
		{"right token", "GET", "/v1/orders/x", "Bearer " + testToken, 404},
		{"scheme in lower case", "GET", "/v1/orders/x", "bearer " + testToken, 404},
		{"gateway without token", "POST", "/v1/payins", "-", 401},
		{"watch without token", "POST", "/v1/watch", "-", 401},
		{"resend without token", "POST", "/v1/outbox/resend", "-", 401},
		{"listing without token", "GET", "/v1/attempts?state=in_doubt", "-", 401},
		{"openapi without token", "GET", "/v1/openapi.json", "-", 401},
		{"asyncapi without token", "GET", "/v1/asyncapi.yaml", "-", 401},
		{"report schema without token", "GET", "/v1/report.schema.json", "-", 401},
		{"healthz is public", "GET", "/healthz", "-", 200},
		{"readyz is public", "GET", "/readyz", "-", 200},
		{"metrics is public", "GET", "/metrics", "-", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := ""
			if tt.method == "POST" {
				body = payinBody("m-auth", "1.00")
			}
			auth := tt.auth
			if auth == "-" {
				auth = ""
			}
			r := e.do(tt.method, tt.path, body, "Authorization", auth)
			wantStatus(t, r, tt.status)
			if tt.status == 401 {
				if r.json(t)["error"] == nil || !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
					t.Errorf("401 answer = %s, headers %v", r.body, r.header)
				}
			}
		})
	}
	if len(e.attempts()) != 0 || e.creates.Load() != 0 {
		t.Error("an unauthenticated request created an attempt")
	}
}

func TestAPI_noToken(t *testing.T) {
	e := newEnv(t, setup{})
	wantStatus(t, e.get("/v1/attempts"), http.StatusOK)
}

func TestAPI_routing(t *testing.T) {
	e := newEnv(t, setup{})
	r := e.do("DELETE", "/v1/payins", "")
	wantStatus(t, r, http.StatusMethodNotAllowed)
	if r.header.Get("Allow") != "POST" || r.json(t)["error"] == nil {
		t.Errorf("405 answer = %s, Allow %q", r.body, r.header.Get("Allow"))
	}
	r = e.get("/v2/nothing")
	wantStatus(t, r, http.StatusNotFound)
	if r.json(t)["error"] == nil {
		t.Errorf("404 answer = %s", r.body)
	}
	wantStatus(t, e.get("/"), http.StatusNotFound) // no dashboard wired
}

func TestAPI_healthz(t *testing.T) {
	e := newEnv(t, setup{})
	r := e.get("/healthz")
	wantStatus(t, r, http.StatusOK)
	if r.json(t)["status"] != "ok" {
		t.Errorf("answer = %s", r.body)
	}
}

func TestAPI_readyz(t *testing.T) {
	natsDown := errors.New("nats unreachable for 45s")
	tests := []struct {
		name    string
		checks  []api.Check
		status  int
		failing []string
	}{
		{"store only", nil, 200, nil},
		{"all checks pass", []api.Check{{Name: "nats", Check: func(context.Context) error { return nil }}}, 200, nil},
		{"a failing check is named", []api.Check{
			{Name: "nats", Check: func(context.Context) error { return natsDown }},
			{Name: "disk", Check: func(context.Context) error { return nil }},
		}, 503, []string{"nats"}},
		{"a check that hangs fails by its time bound", []api.Check{{Name: "slow", Check: func(ctx context.Context) error {
			<-ctx.Done()
			return ctx.Err()
		}}}, 503, []string{"slow"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, setup{checks: tt.checks})
			r := e.get("/readyz")
			wantStatus(t, r, tt.status)
			m := r.json(t)
			if field(m, "checks.store") != "ok" {
				t.Errorf("store check = %v", field(m, "checks.store"))
			}
			var failing []string
			for _, f := range asSlice(m["failing"]) {
				failing = append(failing, f.(string))
			}
			if !slices.Equal(failing, tt.failing) {
				t.Errorf("failing = %v, want %v", failing, tt.failing)
			}
			if len(tt.failing) > 0 && field(m, "checks."+tt.failing[0]) == "ok" {
				t.Errorf("the failing check's error is missing: %s", r.body)
			}
		})
	}
	t.Run("a closed store is not ready", func(t *testing.T) {
		e := newEnv(t, setup{})
		noEventCheck(t)
		// Closing twice is harmless; the cleanup's close then finds it closed.
		if err := e.store.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		r := e.get("/readyz")
		wantStatus(t, r, http.StatusServiceUnavailable)
		if failing := asSlice(r.json(t)["failing"]); len(failing) != 1 || failing[0] != "store" {
			t.Errorf("answer = %s", r.body)
		}
	})
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

// applyOrder stores an order as a poll would.
func applyOrder(t *testing.T, s *store.Store, merchantOrderID, typ, status, created string) {
	t.Helper()
	raw := fmt.Appendf(nil, `{"id":"prov-%s","merchantOrderId":%q,"type":%q,"createdAt":%q,"status":%q,"rejectReason":null,"transactions":[]}`,
		merchantOrderID, merchantOrderID, typ, created, status)
	o, err := provider.DecodeOrder(raw)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(t.Context(), store.Observation{Source: store.SourcePoll, Order: o, Raw: raw}); err != nil {
		t.Fatal(err)
	}
}

// TestAPI_listOrders_boundedWalk: a filtered page walks a bounded number
// of orders (here 4), so a filter few orders match answers at once with a
// short page, or an empty one, and a nextCursor; following the cursors
// lists every match once, and the last page has none.
func TestAPI_listOrders_boundedWalk(t *testing.T) {
	e := newEnv(t, setup{orderScan: 4})
	const n = 14
	for i := range n {
		status := "processing"
		if i == 9 {
			status = "rejected"
		}
		applyOrder(t, e.store, fmt.Sprintf("o-%02d", i), "payin", status, "2026-03-01T12:00:00Z")
	}
	for _, tt := range []struct {
		query string
		want  []string
	}{
		{"status=rejected", []string{"o-09"}},
		{"status=new", nil},
		{"status=processing&limit=5", nil}, // all but o-09, checked by count
	} {
		t.Run(tt.query, func(t *testing.T) {
			var (
				got    []string
				cursor string
				pages  int
			)
			for {
				path := "/v1/orders?" + tt.query
				if cursor != "" {
					path += "&cursor=" + url.QueryEscape(cursor)
				}
				r := e.get(path)
				wantStatus(t, r, http.StatusOK)
				var page struct {
					Orders []struct {
						MerchantOrderID string `json:"merchantOrderId"`
					} `json:"orders"`
					NextCursor string `json:"nextCursor"`
				}
				if err := json.Unmarshal(r.body, &page); err != nil {
					t.Fatal(err)
				}
				pages++
				for _, o := range page.Orders {
					got = append(got, o.MerchantOrderID)
				}
				if page.NextCursor == "" {
					break
				}
				if pages > n {
					t.Fatal("paging does not end")
				}
				cursor = page.NextCursor
			}
			if pages < 3 {
				t.Errorf("%d pages: the walk of a page was not bounded", pages)
			}
			if strings.HasPrefix(tt.query, "status=processing") {
				if len(got) != n-1 || slices.Contains(got, "o-09") {
					t.Errorf("listed %q, want every order but o-09", got)
				}
				return
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("listed %q, want %q", got, tt.want)
			}
		})
	}
}

func TestAPI_listOrders(t *testing.T) {
	e := newEnv(t, setup{})
	const n = 37
	for i := range n {
		typ, status := "payin", "processing"
		if i%4 == 0 {
			typ = "payout"
		}
		if i%3 == 0 {
			status = "completed"
		}
		applyOrder(t, e.store, fmt.Sprintf("o-%02d", i), typ, status, fmt.Sprintf("2026-03-%02dT12:00:00Z", 1+i%10))
	}

	t.Run("paging returns every order exactly once", func(t *testing.T) {
		seen := map[string]int{}
		cursor, pages := "", 0
		for {
			path := "/v1/orders?limit=10"
			if cursor != "" {
				path += "&cursor=" + url.QueryEscape(cursor)
			}
			r := e.get(path)
			wantStatus(t, r, http.StatusOK)
			var page struct {
				Orders []struct {
					MerchantOrderID string          `json:"merchantOrderId"`
					Order           json.RawMessage `json:"order"`
				} `json:"orders"`
				NextCursor string `json:"nextCursor"`
			}
			if err := json.Unmarshal(r.body, &page); err != nil {
				t.Fatal(err)
			}
			pages++
			for _, o := range page.Orders {
				seen[o.MerchantOrderID]++
				if !strings.Contains(string(o.Order), o.MerchantOrderID) {
					t.Errorf("order %s carries %s", o.MerchantOrderID, o.Order)
				}
			}
			if pages == 2 {
				// An order arriving mid-listing is seen once too.
				applyOrder(t, e.store, "o-late", "payin", "processing", "2026-03-05T12:00:00Z")
			}
			if page.NextCursor == "" {
				break
			}
			if pages > n {
				t.Fatal("paging does not end")
			}
			cursor = page.NextCursor
		}
		if len(seen) != n+1 || pages != 4 {
			t.Errorf("saw %d orders in %d pages, want %d in 4", len(seen), pages, n+1)
		}
		for id, k := range seen {
			if k != 1 {
				t.Errorf("%s listed %d times", id, k)
			}
		}
	})

	// The provider's unknown values are kept as sent, and can be listed.
	applyOrder(t, e.store, "o-odd", "chargeback", "escalated", "2026-04-01T12:00:00Z")

	tests := []struct {
		name  string
		query string
		want  int
	}{
		{"status", "status=completed", 13},
		{"a documented status no order has", "status=rejected", 0},
		{"a status the provider does not document, as stored", "status=escalated", 1},
		{"a type the provider does not document, as stored", "type=chargeback", 1},
		{"type", "type=payout", 10},
		{"status and type", "status=completed&type=payout", 4},
		{"dates", "from=2026-03-02&to=2026-03-04", 8},
		{"RFC 3339 times", "from=2026-03-02T12:00:00Z&to=2026-03-02T12:00:01Z", 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.get("/v1/orders?limit=500&" + tt.query)
			wantStatus(t, r, http.StatusOK)
			if got := len(asSlice(r.json(t)["orders"])); got != tt.want {
				t.Errorf("%d orders, want %d", got, tt.want)
			}
		})
	}

	bad := []struct {
		name, query, param string
	}{
		{"limit zero", "limit=0", "limit"},
		{"limit too big", "limit=501", "limit"},
		{"limit not a number", "limit=ten", "limit"},
		{"bad from", "from=yesterday", "from"},
		// The zero time is the store's "no bound": refused, not dropped.
		{"from at the zero time", "from=0001-01-01T00:00:00Z", "from"},
		{"to at the zero time", "to=0001-01-01", "to"},
		{"to at the zero time by its offset", "to=" + url.QueryEscape("0001-01-01T01:00:00+01:00"), "to"},
		{"both at the zero time", "from=0001-01-01&to=0001-01-01", "from"},
		{"from before 1970", "from=1969-12-31T23:59:59Z", "from"},
		{"to before from", "from=2026-03-04&to=2026-03-02", "to"},
		{"bad cursor", "cursor=zzz", "cursor"},
		{"cursor of another listing", "cursor=" + attemptsCursor(t, e), "cursor"},
		{"unknown parameter", "state=open", "state"},
		{"parameter twice", "status=new&status=completed", "status"},
		{"bad status", "status=" + url.QueryEscape("new' OR 1=1"), "status"},
		{"status nobody has", "status=bogus", "status"},
		{"status misspelt", "status=complete", "status"},
		{"status nobody has, other filters too", "status=bogus&type=payin&from=2026-03-01", "status"},
		{"type nobody has", "type=refundx", "type"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			r := e.get("/v1/orders?" + tt.query)
			wantStatus(t, r, http.StatusBadRequest)
			m := r.json(t)
			if m["field"] != tt.param || !strings.Contains(m["error"].(string), tt.param) {
				t.Errorf("answer = %s, want it to name %q", r.body, tt.param)
			}
		})
	}
	r := e.get("/v1/orders?status=bogus")
	if m := r.json(t); m["error"] != `status "bogus" is not one of new, processing, completed, rejected, and no stored order has it` {
		t.Errorf("status=bogus: %s", r.body)
	}
}

// attemptsCursor returns a cursor the attempts listing gave out.
func attemptsCursor(t *testing.T, e *env) string {
	t.Helper()
	for i := range 2 {
		if _, _, err := e.store.BeginAttempt(t.Context(), store.NewAttempt{Kind: store.AttemptPayin,
			MerchantOrderID: fmt.Sprintf("c-%d", i), IdempotencyKey: fmt.Sprintf("order:c-%d", i),
			Request: json.RawMessage(`{}`), RequestHash: "h", State: store.AttemptInDoubt}); err != nil {
			t.Fatal(err)
		}
	}
	r := e.get("/v1/attempts?limit=1")
	wantStatus(t, r, http.StatusOK)
	c, _ := r.json(t)["nextCursor"].(string)
	if c == "" {
		t.Fatalf("no cursor in %s", r.body)
	}
	return c
}

func TestAPI_getOrder(t *testing.T) {
	e := newEnv(t, setup{})
	applyOrder(t, e.store, "known", "payin", "processing", "2026-03-01T12:00:00Z")
	applyOrder(t, e.store, "known", "payin", "completed", "2026-03-01T12:00:00Z")
	r := e.get("/v1/orders/known")
	wantStatus(t, r, http.StatusOK)
	m := r.json(t)
	for _, k := range []string{"order", "learnedVia", "firstSeenAt", "updatedAt", "history", "attempts"} {
		if _, ok := m[k]; !ok {
			t.Errorf("answer lacks %q: %s", k, r.body)
		}
	}
	if field(m, "order.status") != "completed" || m["learnedVia"] != "poll" {
		t.Errorf("answer = %s", r.body)
	}
	h := asSlice(m["history"])
	if len(h) != 2 || field(h[0].(map[string]any), "status") != "processing" || field(h[1].(map[string]any), "source") != "poll" {
		t.Errorf("history = %v", h)
	}
	if a := m["attempts"]; a == nil || len(asSlice(a)) != 0 {
		t.Errorf("attempts = %v, want []", a)
	}

	r = e.get("/v1/orders/" + url.PathEscape("no such/order"))
	wantStatus(t, r, http.StatusNotFound)
	if r.json(t)["error"] == nil {
		t.Errorf("404 answer = %s", r.body)
	}
}

func TestAPI_listAttempts(t *testing.T) {
	e := newEnv(t, setup{})
	begin := func(id string, state store.AttemptState) {
		t.Helper()
		if _, _, err := e.store.BeginAttempt(t.Context(), store.NewAttempt{Kind: store.AttemptPayout, MerchantOrderID: id,
			IdempotencyKey: "order:" + id, Request: json.RawMessage(`{"merchantOrderId":"` + id + `"}`), RequestHash: id,
			State: state}); err != nil {
			t.Fatal(err)
		}
	}
	begin("a-1", store.AttemptInDoubt)
	begin("a-2", store.AttemptPending)
	begin("a-3", store.AttemptInDoubt)
	r := e.get("/v1/attempts?state=in_doubt")
	wantStatus(t, r, http.StatusOK)
	var ids []string
	for _, a := range asSlice(r.json(t)["attempts"]) {
		am := a.(map[string]any)
		ids = append(ids, am["merchantOrderId"].(string))
		if am["kind"] != "payout" || field(am, "request.merchantOrderId") != am["merchantOrderId"] {
			t.Errorf("attempt = %v", am)
		}
	}
	if want := []string{"a-1", "a-3"}; !slices.Equal(ids, want) {
		t.Errorf("in-doubt attempts = %v, want %v", ids, want)
	}
	wantStatus(t, e.get("/v1/attempts?state=lost"), http.StatusBadRequest)
	wantStatus(t, e.get("/v1/attempts?kind=transfer"), http.StatusBadRequest)
}

func TestAPI_listFindings(t *testing.T) {
	e := newEnv(t, setup{})
	noEventCheck(t) // its findings and events are made up here
	err := e.store.Write(t.Context(), func(tx *store.Tx) error {
		if _, _, err := tx.OpenFinding(store.FindingStuckOrder, "o-1", map[string]string{"why": "processing for 3 days"}); err != nil {
			return err
		}
		if _, _, err := tx.OpenFinding(store.FindingStuckOrder, "o-2", nil); err != nil {
			return err
		}
		if _, _, err := tx.OpenFinding(store.FindingBalanceDrift, "brl", map[string]string{"unexplained": "-5.00"}); err != nil {
			return err
		}
		_, err := tx.ResolveFinding(store.FindingStuckOrder, "o-2")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, query string
		want        []string
	}{
		{"open by default", "", []string{"o-1", "brl"}},
		{"open", "state=open", []string{"o-1", "brl"}},
		{"resolved", "state=resolved", []string{"o-2"}},
		{"all", "state=all", []string{"o-1", "o-2", "brl"}},
		{"kind", "state=all&kind=stuck_order", []string{"o-1", "o-2"}},
		{"first page", "state=all&limit=2", []string{"o-1", "o-2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.get("/v1/findings?" + tt.query)
			wantStatus(t, r, http.StatusOK)
			m := r.json(t)
			var keys []string
			for _, f := range asSlice(m["findings"]) {
				fm := f.(map[string]any)
				keys = append(keys, fm["key"].(string))
				if fm["state"] == "resolved" && fm["resolvedAt"] == nil {
					t.Errorf("resolved finding without resolvedAt: %v", fm)
				}
			}
			if !slices.Equal(keys, tt.want) {
				t.Errorf("findings = %v, want %v", keys, tt.want)
			}
			if tt.name == "first page" {
				next := e.get("/v1/findings?state=all&limit=2&cursor=" + url.QueryEscape(m["nextCursor"].(string)))
				wantStatus(t, next, http.StatusOK)
				if rest := asSlice(next.json(t)["findings"]); len(rest) != 1 || field(rest[0].(map[string]any), "key") != "brl" {
					t.Errorf("second page = %s", next.body)
				}
			}
		})
	}
	r := e.get("/v1/findings?state=closed")
	wantStatus(t, r, http.StatusBadRequest)
	if r.json(t)["field"] != "state" {
		t.Errorf("answer = %s", r.body)
	}
}

// POST /v1/outbox/resend queues the set-aside events anew and says how
// many; with none set aside it changes nothing.
func TestAPI_outboxResend(t *testing.T) {
	e := newEnv(t, setup{})
	noEventCheck(t) // its findings and events are made up here
	r := e.post("/v1/outbox/resend", "")
	wantStatus(t, r, http.StatusOK)
	if got := r.json(t)["requeued"]; got != float64(0) {
		t.Fatalf("requeued = %v with nothing set aside, want 0", got)
	}
	evs, err := e.store.PendingEvents(t.Context(), 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 0 {
		t.Fatalf("%d events queued by a resend of nothing", len(evs))
	}
	err = e.store.Write(t.Context(), func(tx *store.Tx) error {
		_, err := tx.InsertEvent(store.OutboxEvent{ID: "ev-1", Type: "reconcile.test", Subject: "orderd.reconcile.test",
			EventSubject: "k", Data: []byte(`{}`)})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if evs, err = e.store.PendingEvents(t.Context(), 0, 10); err != nil || len(evs) != 1 {
		t.Fatalf("pending: %d %v", len(evs), err)
	}
	if err := e.store.SetAsideEvent(t.Context(), store.SetAside{Seq: evs[0].Seq, ID: "ev-1", EventSubject: "k", Reason: "too large"}); err != nil {
		t.Fatal(err)
	}
	// A field it does not take is refused, naming it, and requeues nothing.
	before, err := e.store.PendingEvents(t.Context(), evs[0].Seq, 10)
	if err != nil {
		t.Fatal(err)
	}
	r = e.post("/v1/outbox/resend", `{"all":true}`)
	wantStatus(t, r, http.StatusBadRequest)
	if !strings.Contains(string(r.body), "all") {
		t.Errorf("answer %s does not name the field", r.body)
	}
	if p, err := e.store.PendingEvents(t.Context(), evs[0].Seq, 10); err != nil || len(p) != len(before) {
		t.Fatalf("a refused resend: %d events pending, %d before (%v)", len(p), len(before), err)
	}
	r = e.post("/v1/outbox/resend", "{}")
	wantStatus(t, r, http.StatusOK)
	if got := r.json(t)["requeued"]; got != float64(1) {
		t.Fatalf("requeued = %v, want 1", got)
	}
	pending, err := e.store.PendingEvents(t.Context(), evs[0].Seq, 10)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, ev := range pending {
		found = found || (ev.ID == "ev-1" && ev.Seq > evs[0].Seq)
	}
	if !found {
		t.Fatalf("pending after resend = %+v, want ev-1 queued again", pending)
	}
}

func TestAPI_watch(t *testing.T) {
	e := newEnv(t, setup{})
	t.Run("created puts the order on the watch list", func(t *testing.T) {
		r := e.post("/v1/watch", `{"merchantOrderId":"own-1","type":"payin","state":"created"}`)
		wantStatus(t, r, http.StatusAccepted)
		if r.json(t)["state"] != "watching" {
			t.Errorf("answer = %s", r.body)
		}
		var typ string
		if err := e.store.DB().QueryRowContext(t.Context(),
			`SELECT type FROM watches WHERE merchant_order_id = 'own-1' AND resolved_at IS NULL`).Scan(&typ); err != nil || typ != "payin" {
			t.Errorf("watch row: type %q, %v", typ, err)
		}
	})
	t.Run("in_doubt records an attempt the reconciler settles", func(t *testing.T) {
		body := `{"merchantOrderId":"own-2","type":"payout","state":"in_doubt"}`
		r := e.post("/v1/watch", body)
		wantStatus(t, r, http.StatusAccepted)
		m := r.json(t)
		if m["state"] != "in_doubt" || field(m, "attempt.origin") != "watch" || field(m, "attempt.kind") != "payout" {
			t.Errorf("answer = %s", r.body)
		}
		wantStatus(t, e.post("/v1/watch", body), http.StatusOK)
		as, _ := e.store.AttemptsByMerchantID(t.Context(), "own-2")
		if len(as) != 1 {
			t.Fatalf("%d attempts, want 1", len(as))
		}
		due, err := e.store.DueInDoubtAttempts(t.Context(), time.Now().Add(time.Minute), time.Now().Add(time.Minute), 10)
		if err != nil || len(due) != 1 || due[0].ID != as[0].ID {
			t.Errorf("due = %+v, %v; want the watched attempt", due, err)
		}
	})
	t.Run("a requisite is registered for the sweep", func(t *testing.T) {
		id := "0f5e2a9c-3b1d-4c8e-9f7a-1234567890ab"
		r := e.post("/v1/watch", `{"type":"requisite","requisiteId":"`+id+`","currency":"mxn"}`)
		wantStatus(t, r, http.StatusAccepted)
		reqs, err := e.store.Requisites(t.Context(), true)
		if err != nil || len(reqs) != 1 || reqs[0].ID != id || reqs[0].Source != store.RequisiteFromWatch {
			t.Errorf("requisites = %+v, %v", reqs, err)
		}
		// The provider does not know this id: deactivating it answers
		// the provider's refusal, and orderd stops sweeping it all the
		// same (after one last sweep).
		d := e.post("/v1/requisites/deactivate", `{"id":"`+id+`"}`)
		if d.status < 400 || !strings.Contains(string(d.body), "WALLET_NOT_FOUND") {
			t.Errorf("deactivating an id the provider does not know = %d %s, want its WALLET_NOT_FOUND", d.status, d.body)
		}
		if reqs, err := e.store.Requisites(t.Context(), true); err != nil || len(reqs) != 0 {
			t.Errorf("active requisites after the deactivation = %+v, %v; want none", reqs, err)
		}
	})
	bad := []struct {
		name, body string
		fields     []string
	}{
		{"empty", `{}`, []string{"type", "merchantOrderId", "state"}},
		{"bad type", `{"merchantOrderId":"x","type":"refund","state":"created"}`, []string{"type"}},
		{"bad state", `{"merchantOrderId":"x","type":"payin","state":"lost"}`, []string{"state"}},
		{"requisite without id", `{"type":"requisite","state":"created"}`, []string{"requisiteId", "state"}},
		{"order with a requisite id", `{"merchantOrderId":"x","type":"payin","state":"created","requisiteId":"r"}`, []string{"requisiteId"}},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			r := e.post("/v1/watch", tt.body)
			wantStatus(t, r, http.StatusUnprocessableEntity)
			var got []string
			for _, ve := range asSlice(field(r.json(t), "error.validationErrors")) {
				got = append(got, ve.(map[string]any)["field"].(string))
			}
			if !slices.Equal(got, tt.fields) {
				t.Errorf("fields = %v, want %v", got, tt.fields)
			}
		})
	}
	wantStatus(t, e.post("/v1/watch", `{"merchantOrderId":"x","type":"payin","state":"created","why":1}`), http.StatusBadRequest)
}

func TestAPI_watch_inDoubtOfAnotherType(t *testing.T) {
	e := newEnv(t, setup{})
	wantStatus(t, e.post("/v1/payins", payinBody("g-1", "10.00")), http.StatusCreated)
	wantStatus(t, e.post("/v1/watch", `{"merchantOrderId":"own-3","type":"payout","state":"in_doubt"}`), http.StatusAccepted)
	tests := []struct {
		name, body string
		// kind is the existing attempt's.
		kind string
	}{
		{"payout watched for a gateway payin", `{"merchantOrderId":"g-1","type":"payout","state":"in_doubt"}`, "payin"},
		{"payin watched for a watched payout", `{"merchantOrderId":"own-3","type":"payin","state":"in_doubt"}`, "payout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.post("/v1/watch", tt.body)
			wantStatus(t, r, http.StatusConflict)
			m := r.json(t)
			msg, _ := field(m, "error.message").(string)
			ves := asSlice(field(m, "error.validationErrors"))
			if m["state"] != "rejected" || field(m, "error.code") != "IDEMPOTENCY_CONFLICT" ||
				field(m, "attempt.kind") != tt.kind || !strings.Contains(msg, "type") ||
				len(ves) != 1 || ves[0].(map[string]any)["field"] != "type" {
				t.Errorf("answer = %s, want a conflict naming type and the %s attempt", r.body, tt.kind)
			}
		})
	}
	if n := len(e.attempts()); n != 2 {
		t.Errorf("%d attempts, want the 2 there were", n)
	}
	// The same type is still the same creation.
	wantStatus(t, e.post("/v1/watch", `{"merchantOrderId":"g-1","type":"payin","state":"in_doubt"}`), http.StatusOK)
}

func TestAPI_openAPI(t *testing.T) {
	e := newEnv(t, setup{})
	r := e.get("/v1/openapi.json")
	wantStatus(t, r, http.StatusOK)
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(r.body, &doc); err != nil {
		t.Fatalf("the document is not JSON: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1") {
		t.Errorf("openapi = %q, want 3.1.x", doc.OpenAPI)
	}
	// Every route the router registers, optional handlers included, is
	// documented, and the document names no route the router lacks.
	stub := http.NotFoundHandler()
	routes := api.Routes(api.Deps{Metrics: stub, Reports: stub, ReportFiles: stub, Dashboard: stub, Cluster: stubCluster{}})
	registered := map[string]bool{}
	for _, rt := range routes {
		registered[rt] = true
		method, path, _ := strings.Cut(rt, " ")
		if _, ok := doc.Paths[path][strings.ToLower(method)]; !ok {
			t.Errorf("route %s is not in openapi.json", rt)
		}
	}
	for path, ops := range doc.Paths {
		for method := range ops {
			if rt := strings.ToUpper(method) + " " + path; !registered[rt] {
				t.Errorf("openapi.json documents %s, which the router does not serve", rt)
			}
		}
	}
	if len(routes) < 16 {
		t.Errorf("the route table has %d routes; did it lose some?", len(routes))
	}
}

func TestAPI_asyncAPI(t *testing.T) {
	e := newEnv(t, setup{})
	r := e.get("/v1/asyncapi.yaml")
	wantStatus(t, r, http.StatusOK)
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/yaml") {
		t.Errorf("Content-Type = %q, want application/yaml", ct)
	}
	onDisk, err := os.ReadFile("asyncapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r.body, onDisk) {
		t.Errorf("served document differs from api/asyncapi.yaml (%d bytes, want %d)", len(r.body), len(onDisk))
	}
	var doc struct {
		AsyncAPI   string `yaml:"asyncapi"`
		Components struct {
			Schemas map[string]any `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(r.body, &doc); err != nil {
		t.Fatalf("the document is not YAML: %v", err)
	}
	if !strings.HasPrefix(doc.AsyncAPI, "3.0") {
		t.Errorf("asyncapi = %q, want 3.0.x", doc.AsyncAPI)
	}
	// The schemas dataschema names for an order and a finding are there.
	for _, name := range []string{"Order", "NotCreatedAttempt", "StuckOrderFinding"} {
		if doc.Components.Schemas[name] == nil {
			t.Errorf("components/schemas lacks %s", name)
		}
	}
}

// stubCluster is a replicated mode's api.Cluster, for the route table.
type stubCluster struct{}

func (stubCluster) Status(context.Context) any            { return nil }
func (stubCluster) Snapshot(context.Context) (any, error) { return nil, nil }

// TestAPI_reportSchema: the JSON report's response in openapi.json refers
// to the report's JSON Schema by a relative reference, and that reference,
// resolved against the document's own URL, is served with the schema.
func TestAPI_reportSchema(t *testing.T) {
	e := newEnv(t, setup{})
	var doc struct {
		Paths map[string]struct {
			Get struct {
				Responses map[string]struct {
					Content map[string]struct {
						Schema struct {
							Ref string `json:"$ref"`
						} `json:"schema"`
					} `json:"content"`
				} `json:"responses"`
			} `json:"get"`
		} `json:"paths"`
	}
	r := e.get("/v1/openapi.json")
	wantStatus(t, r, http.StatusOK)
	if err := json.Unmarshal(r.body, &doc); err != nil {
		t.Fatal(err)
	}
	ref := doc.Paths["/v1/reports/reconciliation"].Get.Responses["200"].Content["application/json"].Schema.Ref
	if ref == "" {
		t.Fatal("the JSON report's response has no $ref to its schema")
	}
	base, _ := url.Parse("/v1/openapi.json")
	target, err := base.Parse(ref)
	if err != nil {
		t.Fatal(err)
	}
	s := e.get(target.Path)
	wantStatus(t, s, http.StatusOK)
	if ct := s.header.Get("Content-Type"); ct != "application/schema+json" {
		t.Errorf("Content-Type %q", ct)
	}
	if !bytes.Equal(s.body, api.ReportSchema()) {
		t.Errorf("%s does not serve the report schema", target.Path)
	}
	var schema struct {
		Schema string `json:"$schema"`
	}
	if err := json.Unmarshal(s.body, &schema); err != nil || schema.Schema != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("schema's $schema %q (%v), want draft 2020-12", schema.Schema, err)
	}
}

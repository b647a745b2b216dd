package api

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"orderd/provider"
	"orderd/store"
)

// Page sizes of the listings.
const (
	defaultLimit = 50
	maxLimit     = 500
)

// attemptView is an attempt as the API shows it.
type attemptView struct {
	ID              int64           `json:"id"`
	Kind            string          `json:"kind"`
	Origin          string          `json:"origin"`
	MerchantOrderID string          `json:"merchantOrderId,omitempty"`
	IdempotencyKey  string          `json:"idempotencyKey"`
	State           string          `json:"state"`
	ErrorCode       string          `json:"errorCode,omitempty"`
	Detail          string          `json:"detail,omitempty"`
	Request         json.RawMessage `json:"request"`
	Response        json.RawMessage `json:"response,omitempty"`
	CreatedAt       time.Time       `json:"createdAt"`
	UpdatedAt       time.Time       `json:"updatedAt"`
	SettledAt       *time.Time      `json:"settledAt,omitempty"`
	NextCheckAt     *time.Time      `json:"nextCheckAt,omitempty"`
	CheckAttempts   int             `json:"checkAttempts"`
}

func newAttemptView(a store.Attempt) attemptView {
	v := attemptView{
		ID: a.ID, Kind: string(a.Kind), Origin: string(a.Origin), MerchantOrderID: a.MerchantOrderID,
		IdempotencyKey: a.IdempotencyKey, State: string(a.State), ErrorCode: a.ErrorCode, Detail: a.Detail,
		Request: a.Request, Response: a.Response, CreatedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt,
		CheckAttempts: a.CheckAttempts,
	}
	if !json.Valid(v.Request) {
		v.Request = json.RawMessage("null")
	}
	if len(v.Response) > 0 && !json.Valid(v.Response) {
		v.Response = nil
	}
	if !a.SettledAt.IsZero() {
		t := a.SettledAt
		v.SettledAt = &t
	}
	if !a.NextCheckAt.IsZero() {
		t := a.NextCheckAt
		v.NextCheckAt = &t
	}
	return v
}

func attemptViews(as []store.Attempt) []attemptView {
	out := make([]attemptView, 0, len(as))
	for _, a := range as {
		out = append(out, newAttemptView(a))
	}
	return out
}

// orderBody is the answer of GET /v1/orders/{merchantOrderId}.
type orderBody struct {
	Order       json.RawMessage      `json:"order"`
	LearnedVia  store.Source         `json:"learnedVia"`
	FirstSeenAt time.Time            `json:"firstSeenAt"`
	UpdatedAt   time.Time            `json:"updatedAt"`
	History     []store.HistoryEntry `json:"history"`
	Attempts    []attemptView        `json:"attempts"`
}

// unknownOrderBody is the 404 of GET /v1/orders/{merchantOrderId}; it lists
// the attempts about the id, since an in-doubt creation has no order yet.
type unknownOrderBody struct {
	Error    string        `json:"error"`
	Attempts []attemptView `json:"attempts,omitempty"`
}

// handleGetOrder is GET /v1/orders/{merchantOrderId}.
func (s *server) handleGetOrder(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("merchantOrderId")
	attempts, err := s.deps.Store.AttemptsByMerchantID(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	o, err := s.deps.Store.OrderByMerchantID(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		writeJSON(w, http.StatusNotFound, unknownOrderBody{
			Error:    fmt.Sprintf("order %q is not known", id),
			Attempts: attemptViews(attempts),
		})
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	history := o.History
	if history == nil {
		history = []store.HistoryEntry{}
	}
	order := o.Order
	if !json.Valid(order) {
		order = json.RawMessage("null")
	}
	writeJSON(w, http.StatusOK, orderBody{
		Order: order, LearnedVia: o.LearnedVia, FirstSeenAt: o.FirstSeenAt, UpdatedAt: o.UpdatedAt,
		History: history, Attempts: attemptViews(attempts),
	})
}

// orderItem is one order of GET /v1/orders.
type orderItem struct {
	ID              string          `json:"id"`
	MerchantOrderID string          `json:"merchantOrderId"`
	Type            string          `json:"type"`
	Status          string          `json:"status"`
	LearnedVia      store.Source    `json:"learnedVia"`
	CreatedAt       *time.Time      `json:"createdAt,omitempty"`
	FirstSeenAt     time.Time       `json:"firstSeenAt"`
	UpdatedAt       time.Time       `json:"updatedAt"`
	CompletedAt     *time.Time      `json:"completedAt,omitempty"`
	Order           json.RawMessage `json:"order"`
}

type ordersPage struct {
	Orders     []orderItem `json:"orders"`
	NextCursor string      `json:"nextCursor,omitempty"`
}

// handleListOrders is GET /v1/orders?status=&type=&from=&to=&limit=&cursor=.
func (s *server) handleListOrders(w http.ResponseWriter, r *http.Request) {
	q, err := queryParams(r, "status", "type", "from", "to", "limit", "cursor")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var oq store.OrderQuery
	if oq.Status, err = tokenParam(q, "status"); err != nil {
		s.fail(w, r, err)
		return
	}
	if oq.Type, err = tokenParam(q, "type"); err != nil {
		s.fail(w, r, err)
		return
	}
	if oq.From, err = timeParam(q, "from"); err != nil {
		s.fail(w, r, err)
		return
	}
	if oq.To, err = timeParam(q, "to"); err != nil {
		s.fail(w, r, err)
		return
	}
	if !oq.From.IsZero() && !oq.To.IsZero() && !oq.To.After(oq.From) {
		s.fail(w, r, &badRequestError{field: "to", msg: "to must be after from"})
		return
	}
	limit, err := limitParam(q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if oq.AfterID, err = cursorParam(q, "orders"); err != nil {
		s.fail(w, r, err)
		return
	}
	oq.Limit = limit + 1 // one more tells whether a next page exists
	res, err := s.deps.Store.OrdersPage(r.Context(), oq)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	rows := res.Orders
	if len(rows) == 0 {
		if err := s.checkOrderWords(r.Context(), oq); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	page := ordersPage{Orders: make([]orderItem, 0, min(len(rows), limit))}
	for i, o := range rows {
		if i == limit {
			page.NextCursor = encodeCursor("orders", rows[i-1].RowID)
			break
		}
		page.Orders = append(page.Orders, orderItem{
			ID: o.ProviderID, MerchantOrderID: o.MerchantOrderID, Type: o.Type, Status: o.Status,
			LearnedVia: o.LearnedVia, CreatedAt: timePtr(o.CreatedAt), FirstSeenAt: o.FirstSeenAt,
			UpdatedAt: o.UpdatedAt, CompletedAt: timePtr(o.CompletedAt), Order: o.Order,
		})
	}
	if res.ScannedTo > 0 {
		// A filtered page walks a bounded number of orders: fewer than
		// limit matched among them, and the listing goes on after them.
		page.NextCursor = encodeCursor("orders", res.ScannedTo)
	}
	writeJSON(w, http.StatusOK, page)
}

type attemptsPage struct {
	Attempts   []attemptView `json:"attempts"`
	NextCursor string        `json:"nextCursor,omitempty"`
}

// attemptStates and attemptKinds are the values the listing filters on.
var (
	attemptStates = []string{string(store.AttemptPending), string(store.AttemptCreated),
		string(store.AttemptRejected), string(store.AttemptInDoubt), string(store.AttemptNotCreated)}
	attemptKinds = []string{string(store.AttemptPayin), string(store.AttemptPayout), string(store.AttemptRefund),
		string(store.AttemptRequisite), string(store.AttemptRequisiteDeactivate)}
)

// handleListAttempts is GET /v1/attempts?state=&kind=&limit=&cursor=.
func (s *server) handleListAttempts(w http.ResponseWriter, r *http.Request) {
	q, err := queryParams(r, "state", "kind", "limit", "cursor")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var aq store.AttemptQuery
	state, err := enumParam(q, "state", attemptStates...)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	kind, err := enumParam(q, "kind", attemptKinds...)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	aq.State, aq.Kind = store.AttemptState(state), store.AttemptKind(kind)
	limit, err := limitParam(q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if aq.AfterID, err = cursorParam(q, "attempts"); err != nil {
		s.fail(w, r, err)
		return
	}
	aq.Limit = limit + 1
	as, err := s.deps.Store.ListAttempts(r.Context(), aq)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	page := attemptsPage{}
	if len(as) > limit {
		as = as[:limit]
		page.NextCursor = encodeCursor("attempts", as[limit-1].ID)
	}
	page.Attempts = attemptViews(as)
	writeJSON(w, http.StatusOK, page)
}

type findingsPage struct {
	Findings   []store.Finding `json:"findings"`
	NextCursor string          `json:"nextCursor,omitempty"`
}

// handleListFindings is GET /v1/findings?state=open|resolved|all&kind=&limit=&cursor=.
// The state defaults to open.
func (s *server) handleListFindings(w http.ResponseWriter, r *http.Request) {
	q, err := queryParams(r, "state", "kind", "limit", "cursor")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var fq store.FindingQuery
	state, err := enumParam(q, "state", "open", "resolved", "all")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	switch state {
	case "":
		fq.State = "open"
	case "all":
	default:
		fq.State = state
	}
	if fq.Kind, err = tokenParam(q, "kind"); err != nil {
		s.fail(w, r, err)
		return
	}
	limit, err := limitParam(q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if fq.AfterID, err = cursorParam(q, "findings"); err != nil {
		s.fail(w, r, err)
		return
	}
	fq.Limit = limit + 1
	fs, err := s.deps.Store.FindingsPage(r.Context(), fq)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	page := findingsPage{Findings: fs}
	if len(fs) > limit {
		page.Findings = fs[:limit]
		page.NextCursor = encodeCursor("findings", fs[limit-1].ID)
	}
	if page.Findings == nil {
		page.Findings = []store.Finding{}
	}
	writeJSON(w, http.StatusOK, page)
}

// queryParams returns the query, refusing parameters the route does not
// take and parameters given twice, so a typo is an answer, not a filter
// silently ignored.
func queryParams(r *http.Request, allowed ...string) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, &badRequestError{msg: "query string: " + err.Error()}
	}
	names := make([]string, 0, len(q))
	for name := range q {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if !slices.Contains(allowed, name) {
			return nil, &badRequestError{field: name, msg: fmt.Sprintf("unknown parameter %q; this route takes %s",
				name, strings.Join(allowed, ", "))}
		}
		if len(q[name]) > 1 {
			return nil, &badRequestError{field: name, msg: fmt.Sprintf("parameter %q is given more than once", name)}
		}
	}
	return q, nil
}

// Order statuses and types the provider documents. Others are kept as the
// provider sent them, so a listing may still filter on one that is stored.
var (
	knownStatuses = []string{string(provider.StatusNew), string(provider.StatusProcessing),
		string(provider.StatusCompleted), string(provider.StatusRejected)}
	knownTypes = []string{string(provider.TypePayin), string(provider.TypePayout)}
)

// checkOrderWords runs when a listing came back empty: a status or type
// the provider does not document, which no stored order has either, is a
// mistake (status=bogus, status=complete) answered 400 naming the
// parameter, rather than an empty list that reads as "no such orders".
func (s *server) checkOrderWords(ctx context.Context, q store.OrderQuery) error {
	for _, c := range []struct {
		field, value string
		known        []string
	}{
		{"status", q.Status, knownStatuses},
		{"type", q.Type, knownTypes},
	} {
		if c.value == "" || slices.Contains(c.known, c.value) {
			continue
		}
		held, err := s.deps.Store.HasOddOrderWord(ctx, c.field, c.value)
		if err != nil {
			return err
		}
		if !held {
			return &badRequestError{field: c.field, msg: fmt.Sprintf("%s %q is not one of %s, and no stored order has it",
				c.field, c.value, strings.Join(c.known, ", "))}
		}
	}
	return nil
}

// tokenParam reads an optional word such as a status or a type.
func tokenParam(q url.Values, name string) (string, error) {
	v := q.Get(name)
	if len(v) > 64 || strings.ContainsFunc(v, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-')
	}) {
		return "", &badRequestError{field: name, msg: fmt.Sprintf("%s must be a word of letters, digits, _ or -", name)}
	}
	return v, nil
}

// enumParam reads an optional parameter with a fixed set of values.
func enumParam(q url.Values, name string, allowed ...string) (string, error) {
	v := q.Get(name)
	if v != "" && !slices.Contains(allowed, v) {
		return "", &badRequestError{field: name, msg: fmt.Sprintf("%s must be one of %s", name, strings.Join(allowed, ", "))}
	}
	return v, nil
}

// timeParam reads an optional RFC 3339 time or a date (midnight UTC).
func timeParam(q url.Values, name string) (time.Time, error) {
	v := q.Get(name)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		t, err = time.Parse(time.DateOnly, v)
	}
	if err != nil {
		return time.Time{}, &badRequestError{field: name,
			msg: fmt.Sprintf("%s must be an RFC 3339 time or a date (YYYY-MM-DD), got %q", name, v)}
	}
	// The zero time means "no bound" to the store: a bound that reads as
	// it (0001-01-01, or a time with an offset that is it in UTC) would be
	// dropped without a word, and to=0001-01-01 would list every order
	// instead of none. orderd keeps times from 1970 on, as the reports'
	// bounds do, so earlier ones are refused.
	if t = t.UTC(); t.Year() < 1970 {
		return time.Time{}, &badRequestError{field: name,
			msg: fmt.Sprintf("%s %q is before 1970, which no order can be", name, v)}
	}
	return t, nil
}

// limitParam reads the page size: default 50, 1 to 500.
func limitParam(q url.Values) (int, error) {
	v := q.Get("limit")
	if v == "" {
		return defaultLimit, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxLimit {
		return 0, &badRequestError{field: "limit", msg: fmt.Sprintf("limit must be an integer from 1 to %d", maxLimit)}
	}
	return n, nil
}

// Cursors are opaque to clients: the listing's name and the last row id,
// base64url-encoded, so that a cursor of one listing is refused by another.
func encodeCursor(listing string, id int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(listing + ":" + strconv.FormatInt(id, 10)))
}

func cursorParam(q url.Values, listing string) (int64, error) {
	v := q.Get("cursor")
	if v == "" {
		return 0, nil
	}
	bad := &badRequestError{field: "cursor", msg: "cursor is not one this listing gave out"}
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return 0, bad
	}
	name, num, ok := strings.Cut(string(b), ":")
	if !ok || name != listing {
		return 0, bad
	}
	id, err := strconv.ParseInt(num, 10, 64)
	if err != nil || id < 0 {
		return 0, bad
	}
	return id, nil
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

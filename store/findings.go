package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// This file holds the human workflow of findings: a person acknowledges,
// resolves (with a resolution) or reopens a finding, and each action is
// kept in its trail (finding_actions) and sent as an event.

// Finding statuses (Finding.Status). A finding is open until someone (the reconciler, or a
// person) resolves it; acknowledged is open with a person on it.
const (
	StatusOpen         = "open"
	StatusAcknowledged = "acknowledged"
	StatusResolved     = "resolved"
)

// Actions a person takes on a finding.
const (
	ActionAcknowledge = "acknowledge"
	ActionResolve     = "resolve"
	ActionReopen      = "reopen"
)

// Resolutions a person gives when resolving a finding.
const (
	// ResolutionExplained: the finding has a cause outside what orderd
	// sees (a provider fee, a chargeback) and the money is accounted for.
	ResolutionExplained = "explained"
	// ResolutionWrittenOff: the amount is accepted as lost or gained.
	ResolutionWrittenOff = "written_off"
	// ResolutionFixed: the cause was corrected (the provider reversed a
	// wrong movement, a stuck order was settled by hand).
	ResolutionFixed = "fixed"
)

// FindingActions and Resolutions list the words the workflow takes.
var (
	FindingActions = []string{ActionAcknowledge, ActionResolve, ActionReopen}
	Resolutions    = []string{ResolutionExplained, ResolutionWrittenOff, ResolutionFixed}
)

// FindingAction is one entry of a finding's trail.
type FindingAction struct {
	Action     string    `json:"action"`
	By         string    `json:"by"`
	Note       string    `json:"note"`
	Resolution string    `json:"resolution,omitempty"`
	At         time.Time `json:"at"`
}

// ErrFindingNotFound is returned for an action on a finding id that does
// not exist.
var ErrFindingNotFound = errors.New("finding not found")

// TransitionError is an action that does not apply to the finding as it
// stands (resolving a resolved finding, reopening an open one).
type TransitionError struct {
	ID     int64
	Action string
	Status string
	// Reason adds what stands in the way beyond the status, if anything.
	Reason string
}

func (e *TransitionError) Error() string {
	msg := fmt.Sprintf("finding %d is %s: %s does not apply", e.ID, e.Status, e.Action)
	if e.Reason != "" {
		msg += " (" + e.Reason + ")"
	}
	return msg
}

// FindingActionCmd is a person's action on a finding: it checks that the
// action applies, records it in the trail, changes the finding and queues
// a "reconcile.<kind>" event whose id is EventID(finding id, "action",
// action id). Its result is the finding as it now stands, with its trail.
// The caller has checked the words (action, resolution, by).
type FindingActionCmd struct {
	ID         int64
	Action     string
	By         string
	Note       string
	Resolution string
}

// Kind implements Command.
func (*FindingActionCmd) Kind() string { return "finding.act" }

// Apply implements Command.
func (c *FindingActionCmd) Apply(tx *Tx) (any, error) {
	f, err := findingByID(context.Background(), txQueryer{tx}, c.ID)
	if err != nil {
		return nil, err
	}
	now := tx.Now().UnixMilli()
	refuse := func(reason string) error {
		return &TransitionError{ID: f.ID, Action: c.Action, Status: f.Status, Reason: reason}
	}
	switch c.Action {
	case ActionAcknowledge:
		if f.Status != StatusOpen {
			return nil, refuse("")
		}
		_, err = tx.Exec(`UPDATE findings SET acknowledged_at = ?, updated_at = ? WHERE id = ?`, now, now, f.ID)
	case ActionResolve:
		if f.Status == StatusResolved {
			return nil, refuse("")
		}
		_, err = tx.Exec(`UPDATE findings SET resolved_at = ?, updated_at = ?, resolution = ?, resolved_by = ? WHERE id = ?`,
			now, now, c.Resolution, c.By, f.ID)
		if err == nil && f.Kind == FindingBalanceDrift && c.Resolution != ResolutionFixed {
			err = setDriftAccepted(tx, f, true)
		}
	case ActionReopen:
		if f.Status != StatusResolved {
			return nil, refuse("")
		}
		var other int64
		switch e := tx.QueryRow(`SELECT id FROM findings WHERE kind = ? AND subject_key = ? AND resolved_at IS NULL`,
			f.Kind, f.Key).Scan(&other); {
		case e == nil:
			return nil, refuse(fmt.Sprintf("finding %d about %s is open", other, f.Key))
		case !errors.Is(e, sql.ErrNoRows):
			return nil, fmt.Errorf("reopen finding %d: %w", f.ID, e)
		}
		_, err = tx.Exec(`UPDATE findings SET resolved_at = NULL, acknowledged_at = NULL, resolution = NULL,
			resolved_by = NULL, updated_at = ? WHERE id = ?`, now, f.ID)
		if err == nil && f.Kind == FindingBalanceDrift {
			// What the resolution accepted is no longer accepted.
			err = setDriftAccepted(tx, f, false)
		}
	default:
		return nil, fmt.Errorf("finding %d: unknown action %q", f.ID, c.Action)
	}
	if err != nil {
		return nil, fmt.Errorf("%s finding %d: %w", c.Action, f.ID, err)
	}
	var res any
	if c.Action == ActionResolve {
		res = c.Resolution
	}
	var actionID int64
	if err := tx.QueryRow(`INSERT INTO finding_actions (finding_id, action, actor, note, resolution, at)
		VALUES (?, ?, ?, ?, ?, ?) RETURNING id`, f.ID, c.Action, c.By, c.Note, res, now).Scan(&actionID); err != nil {
		return nil, fmt.Errorf("%s finding %d: trail: %w", c.Action, f.ID, err)
	}
	if f, err = findingByID(context.Background(), txQueryer{tx}, c.ID); err != nil {
		return nil, err
	}
	data, err := json.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("finding %d event: %w", f.ID, err)
	}
	_, err = tx.InsertEvent(OutboxEvent{
		ID:           EventID(strconv.FormatInt(f.ID, 10), "action", strconv.FormatInt(actionID, 10)),
		Type:         "reconcile." + SubjectToken(f.Kind),
		Subject:      FindingSubject(f.Kind),
		EventSubject: f.Key,
		Time:         tx.Now(),
		Data:         data,
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

// reopenedFindingQuery: whether the open finding of a kind and subject
// has a reopen in its trail (findings_open, then finding_actions_finding).
const reopenedFindingQuery = `SELECT 1 FROM findings f JOIN finding_actions a ON a.finding_id = f.id
	WHERE f.kind = ? AND f.subject_key = ? AND f.resolved_at IS NULL AND a.action = 'reopen' LIMIT 1`

// ReopenedFinding reports whether the open finding of kind about key is
// open because a person reopened it. A check that finds its subject fine
// again leaves such a finding open: the person said it is not settled,
// and only a person closes it again.
func (tx *Tx) ReopenedFinding(kind, key string) (bool, error) {
	var one int
	switch err := tx.QueryRow(reopenedFindingQuery, kind, key).Scan(&one); {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reopened finding %s %s: %w", kind, key, err)
	}
	return true, nil
}

// setDriftAccepted marks (or unmarks) the comparison a balance_drift
// finding last described as accepted: a person has accounted for its
// unexplained amount, so the books count as agreed at its closing
// snapshot.
func setDriftAccepted(tx *Tx, f Finding, accepted bool) error {
	var d struct {
		Closing struct {
			ID int64 `json:"id"`
		} `json:"closing"`
	}
	if err := json.Unmarshal(f.Detail, &d); err != nil || d.Closing.ID == 0 {
		return nil // not a comparison's detail: nothing to accept
	}
	_, err := tx.Exec(`UPDATE balance_drifts SET accepted = ? WHERE currency = ? AND closing_id = ?`, accepted, f.Key, d.Closing.ID)
	return err
}

// ActOnFinding runs a person's action on finding id and returns the
// finding as it now stands. Errors: ErrFindingNotFound, *TransitionError.
func (s *Store) ActOnFinding(ctx context.Context, cmd FindingActionCmd) (Finding, error) {
	return ExecAs[Finding](ctx, s, &cmd)
}

// FindingByID returns one finding with its trail, or ErrFindingNotFound.
func (s *Store) FindingByID(ctx context.Context, id int64) (Finding, error) {
	return findingByID(ctx, s.rdb, id)
}

// rowQueryer runs the queries findings are read with: the read pool, a
// report's transaction or the writer's.
type rowQueryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// txQueryer reads through the writer's transaction.
type txQueryer struct{ tx *Tx }

func (q txQueryer) QueryContext(_ context.Context, query string, args ...any) (*sql.Rows, error) {
	return q.tx.Query(query, args...)
}

// findingColumns are the columns scanFinding reads, in order.
const findingColumns = `id, kind, subject_key, detail, found_at, resolved_at, acknowledged_at,
	coalesce(resolution, ''), coalesce(resolved_by, '')`

func scanFinding(r rowScanner) (Finding, error) {
	var (
		f                 Finding
		detail            string
		foundAt           int64
		resolved, ackedAt sql.NullInt64
	)
	if err := r.Scan(&f.ID, &f.Kind, &f.Key, &detail, &foundAt, &resolved, &ackedAt, &f.Resolution, &f.ResolvedBy); err != nil {
		return Finding{}, err
	}
	f.Detail = jsonOrNull([]byte(detail))
	f.FoundAt = unixMilliUTC(foundAt)
	f.State, f.Status = StatusOpen, StatusOpen
	if ackedAt.Valid {
		at := unixMilliUTC(ackedAt.Int64)
		f.AcknowledgedAt, f.Status = &at, StatusAcknowledged
	}
	if resolved.Valid {
		at := unixMilliUTC(resolved.Int64)
		f.ResolvedAt, f.State, f.Status = &at, StatusResolved, StatusResolved
	}
	f.Trail = []FindingAction{}
	return f, nil
}

func findingByID(ctx context.Context, q rowQueryer, id int64) (Finding, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+findingColumns+` FROM findings WHERE id = ?`, id)
	if err != nil {
		return Finding{}, fmt.Errorf("finding %d: %w", id, err)
	}
	var fs []Finding
	for rows.Next() {
		f, err := scanFinding(rows)
		if err != nil {
			rows.Close()
			return Finding{}, fmt.Errorf("finding %d: %w", id, err)
		}
		fs = append(fs, f)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return Finding{}, fmt.Errorf("finding %d: %w", id, err)
	}
	if len(fs) == 0 {
		return Finding{}, fmt.Errorf("finding %d: %w", id, ErrFindingNotFound)
	}
	if err := loadTrails(ctx, q, fs); err != nil {
		return Finding{}, err
	}
	return fs[0], nil
}

// loadTrails fills the trails of fs in one query.
func loadTrails(ctx context.Context, q rowQueryer, fs []Finding) error {
	if len(fs) == 0 {
		return nil
	}
	at := make(map[int64]int, len(fs))
	ids := make([]string, 0, len(fs))
	for i := range fs {
		at[fs[i].ID] = i
		ids = append(ids, strconv.FormatInt(fs[i].ID, 10))
	}
	// The ids are integers this function formatted, so they are safe to
	// place in the query; a page holds at most 1000 of them.
	rows, err := q.QueryContext(ctx, `SELECT finding_id, action, actor, note, coalesce(resolution, ''), at
		FROM finding_actions WHERE finding_id IN (`+strings.Join(ids, ",")+`) ORDER BY finding_id, id`)
	if err != nil {
		return fmt.Errorf("finding trails: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id int64
			a  FindingAction
			ms int64
		)
		if err := rows.Scan(&id, &a.Action, &a.By, &a.Note, &a.Resolution, &ms); err != nil {
			return fmt.Errorf("finding trails: %w", err)
		}
		a.At = unixMilliUTC(ms)
		i := at[id]
		fs[i].Trail = append(fs[i].Trail, a)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("finding trails: %w", err)
	}
	return nil
}

// volatileDetail are detail fields that change from one check to the next
// while the subject stays in the same state; stateKey leaves them out.
var volatileDetail = []string{"checkAttempts", "lastError", "closing", "computedAt", "candidates"}

// stateKey names the state a finding's detail describes (see the
// findings.state_key column). A balance_drift is the same problem while
// the same amount is unexplained from the same opening snapshot; another
// kind, while its detail is the same but for volatileDetail.
func stateKey(kind string, detail json.RawMessage) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(detail, &m) != nil {
		return hashKey(detail)
	}
	if kind == FindingBalanceDrift {
		var d struct {
			Opening struct {
				ID int64 `json:"id"`
			} `json:"opening"`
			Unexplained string `json:"unexplained"`
		}
		if json.Unmarshal(detail, &d) == nil && d.Unexplained != "" {
			return "opening=" + strconv.FormatInt(d.Opening.ID, 10) + " unexplained=" + d.Unexplained
		}
	}
	for _, k := range volatileDetail {
		delete(m, k)
	}
	b, err := json.Marshal(m) // map keys are written sorted
	if err != nil {
		return hashKey(detail)
	}
	return hashKey(b)
}

func hashKey(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// resolvedByPerson reports whether the latest finding of kind about key
// was resolved by a person while its subject was in state.
func (tx *Tx) resolvedByPerson(kind, key, state string) (int64, bool, error) {
	var (
		id       int64
		by       string
		oldState string
		resolved sql.NullInt64
	)
	err := tx.QueryRow(`SELECT id, coalesce(resolved_by, ''), state_key, resolved_at FROM findings
		WHERE kind = ? AND subject_key = ? ORDER BY id DESC LIMIT 1`, kind, key).Scan(&id, &by, &oldState, &resolved)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("latest finding %s %s: %w", kind, key, err)
	}
	return id, resolved.Valid && by != "" && oldState == state, nil
}

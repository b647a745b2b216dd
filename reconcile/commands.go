package reconcile

import (
	"encoding/json"
	"strings"
	"time"

	"orderd/provider"
	"orderd/store"
)

// The reconciler's writes are commands (see store.Command): everything a
// write decides on is in its fields — the provider's answer, the times and
// the backoff computed before — so that in replicated mode every instance
// applies it alike. Their Apply methods are the reconciler's rules run
// inside the store's transaction.
//
// A kind's rules never change under it: a log may hold entries that an
// instance on an older orderd applies too. When the rules of a command
// change, its new entries get a new kind (".2"), which an older instance
// cannot decode, so it stops its applier instead of applying them
// otherwise; entries of the old kind keep applying as they did (legacy).
// The ".2" kinds of applyPolledCmd, recordChecksCmd and watchPollCmd open
// an identity_conflict finding where the old ones failed the command. The
// ".3" kinds carry when each poll was asked (Asked), and a poll asked
// before the stored state arrived opens no mismatch finding (applyPolled);
// decoding fills Asked in, which selects the kind again. The ".3" kinds
// came with log version 4: at an earlier version the same poll is written
// without its time, under the ".2" kind and its rules (Before), so that a
// cluster in the middle of a rolling upgrade writes nothing an instance
// not yet upgraded cannot decode.
func init() {
	for _, legacy := range []bool{false, true} {
		store.RegisterCommand((&applyPolledCmd{legacy: legacy}).Kind(), func() store.Command { return &applyPolledCmd{legacy: legacy} })
		store.RegisterCommand((&recordChecksCmd{legacy: legacy}).Kind(), func() store.Command { return &recordChecksCmd{legacy: legacy} })
		store.RegisterCommand((&watchPollCmd{legacy: legacy}).Kind(), func() store.Command { return &watchPollCmd{legacy: legacy} })
	}
	store.RegisterCommand(pollKind("reconcile.apply_polled", false, true), func() store.Command { return &applyPolledCmd{asked: true} })
	store.RegisterCommand(pollKind("reconcile.record_checks", false, true), func() store.Command { return &recordChecksCmd{asked: true} })
	store.RegisterCommand(pollKind("reconcile.watch_poll", false, true), func() store.Command { return &watchPollCmd{asked: true} })
	store.RegisterCommand((&postponeCheckCmd{}).Kind(), func() store.Command { return &postponeCheckCmd{} })
	store.RegisterCommand((&postponeWatchCmd{}).Kind(), func() store.Command { return &postponeWatchCmd{} })
	// Grace only selects the kind here; decoding fills it in.
	store.RegisterCommand((&recordDriftCmd{}).Kind(), func() store.Command { return &recordDriftCmd{} })
	store.RegisterCommand((&recordDriftCmd{Grace: 2}).Kind(), func() store.Command { return &recordDriftCmd{} })
}

// kind names a command of the rules legacy says.
func kind(name string, legacy bool) string {
	if legacy {
		return name
	}
	return name + ".2"
}

// askedLogVersion is the log version that brought the ".3" kinds.
const askedLogVersion = 4

// askedVersion is the log version a poll command's kind needs.
func askedVersion(kind string) int {
	if strings.HasSuffix(kind, ".3") {
		return askedLogVersion
	}
	return store.OldestLogVersion
}

// pollKind names a command carrying polls: the ".3" kind when it says
// when they were asked, else the kind of the rules legacy says.
func pollKind(name string, legacy, asked bool) string {
	if asked && !legacy {
		return name + ".3"
	}
	return kind(name, legacy)
}

// applyPolledCmd applies an order a poll or a sweep found (applyPolled).
// Asked is when the question was sent (zero in entries written before it
// was carried).
type applyPolledCmd struct {
	Obs    store.Observation
	Asked  time.Time `json:",omitzero"`
	legacy bool
	// asked: made to decode a ".3" entry, of that kind before decoding
	// fills Asked in.
	asked bool
}

func (c *applyPolledCmd) Kind() string {
	return pollKind("reconcile.apply_polled", c.legacy, c.asked || !c.Asked.IsZero())
}

func (c *applyPolledCmd) LogVersion() int { return askedVersion(c.Kind()) }

func (c *applyPolledCmd) Before() store.Command {
	d := *c
	d.Asked, d.asked = time.Time{}, false
	return &d
}

func (c *applyPolledCmd) Apply(tx *store.Tx) (any, error) {
	return applyPolled(tx, c.Obs, c.Asked, c.legacy)
}

// polled is one get-status answer for a due order, as a command carries
// it: the order (or the call's error) and when the order is due next if
// nothing changed.
type polled struct {
	Due   store.DueOrder
	Order *provider.Order `json:",omitempty"`
	Raw   json.RawMessage `json:",omitempty"`
	Err   string          `json:",omitempty"` // the call failed
	Next  time.Time
	// Asked is when the question was sent; zero in entries written
	// before it was carried.
	Asked time.Time `json:",omitzero"`
}

// checked is what recording one answer did.
type checked struct {
	Res      store.Result
	Stuck    bool
	Mismatch bool
}

// recordChecksCmd records a batch of poll answers (recordCheck each).
type recordChecksCmd struct {
	Answers     []polled
	Now         time.Time
	GiveUpAfter time.Duration
	legacy      bool
	// asked: made to decode a ".3" entry (see applyPolledCmd).
	asked bool
}

func (c *recordChecksCmd) Kind() string {
	asked := c.asked
	for _, a := range c.Answers {
		asked = asked || !a.Asked.IsZero()
	}
	return pollKind("reconcile.record_checks", c.legacy, asked)
}

func (c *recordChecksCmd) LogVersion() int { return askedVersion(c.Kind()) }

func (c *recordChecksCmd) Before() store.Command {
	d := *c
	d.asked = false
	d.Answers = make([]polled, len(c.Answers))
	for i, a := range c.Answers {
		a.Asked = time.Time{}
		d.Answers[i] = a
	}
	return &d
}

func (c *recordChecksCmd) Apply(tx *store.Tx) (any, error) {
	outs := make([]checked, len(c.Answers))
	for i, a := range c.Answers {
		var err error
		if outs[i], err = recordCheck(tx, a, c.Now, c.GiveUpAfter, c.legacy); err != nil {
			return nil, err
		}
	}
	return outs, nil
}

// postponeCheckCmd postpones a due order's next poll; Refund: a final
// order polled for its refund in flight.
type postponeCheckCmd struct {
	ProviderID string
	Next       time.Time
	Refund     bool `json:",omitempty"`
}

func (*postponeCheckCmd) Kind() string { return "reconcile.postpone_check" }

func (c *postponeCheckCmd) Apply(tx *store.Tx) (any, error) {
	if c.Refund {
		_, err := tx.PostponeRefundCheck(c.ProviderID, c.Next)
		return nil, err
	}
	_, err := tx.PostponeOrderCheck(c.ProviderID, c.Next)
	return nil, err
}

// watchPollCmd records the answer to a watched order's poll. Its value
// says whether the provider's order was refused as an identity conflict.
type watchPollCmd struct {
	W           store.DueWatch
	Order       *provider.Order `json:",omitempty"`
	Raw         json.RawMessage `json:",omitempty"`
	Err         string          `json:",omitempty"`
	NotFound    bool            `json:",omitempty"` // the call answered ORDER_NOT_FOUND
	Now, Next   time.Time
	GiveUpAfter time.Duration
	// Asked is when the question was sent; zero in entries written
	// before it was carried.
	Asked  time.Time `json:",omitzero"`
	legacy bool
	// asked: made to decode a ".3" entry (see applyPolledCmd).
	asked bool
}

func (c *watchPollCmd) Kind() string {
	return pollKind("reconcile.watch_poll", c.legacy, c.asked || !c.Asked.IsZero())
}

func (c *watchPollCmd) LogVersion() int { return askedVersion(c.Kind()) }

func (c *watchPollCmd) Before() store.Command {
	d := *c
	d.Asked, d.asked = time.Time{}, false
	return &d
}

func (c *watchPollCmd) Apply(tx *store.Tx) (any, error) {
	w := c.W
	if c.Err == "" {
		obs := store.Observation{Source: store.SourcePoll, Order: c.Order, Raw: c.Raw, ObservedAt: c.Now}
		res, err := applyPolled(tx, obs, c.Asked, c.legacy)
		if err != nil {
			return false, err
		}
		if res.Outcome == outcomeConflict {
			// Refused (an identity_conflict finding is open): keep
			// watching with backoff.
			return true, tx.PostponeWatch(w.MerchantOrderID, c.Next)
		}
		if _, err := tx.ResolveFinding(FindingWatchNotFound, w.MerchantOrderID); err != nil {
			return false, err
		}
		return false, tx.ResolveWatch(w.MerchantOrderID)
	}
	if err := tx.PostponeWatch(w.MerchantOrderID, c.Next); err != nil {
		return false, err
	}
	if c.NotFound && w.Reason == store.WatchReasonUnverified && w.Attempts+1 >= unverifiedWatchPolls {
		// Only an unverified webhook named this order and the provider
		// does not know it: most likely a forgery. Stop polling it, so
		// forged webhooks cannot pile up polls that use the rate limit.
		return false, tx.ResolveWatch(w.MerchantOrderID)
	}
	if !c.NotFound || c.Now.Sub(w.CreatedAt) < c.GiveUpAfter {
		return false, nil
	}
	_, _, err := tx.OpenFinding(FindingWatchNotFound, w.MerchantOrderID, watchDetail{
		MerchantOrderID: w.MerchantOrderID, Reason: w.Reason, WatchedSince: w.CreatedAt,
		CheckAttempts: w.Attempts + 1, GiveUpAfter: c.GiveUpAfter.String(),
	})
	return false, err
}

// postponeWatchCmd postpones a watch's next poll. Nothing writes it any
// more (watchPollCmd postpones a refused answer itself); it stays
// registered for log entries written before.
type postponeWatchCmd struct {
	MerchantOrderID string
	Next            time.Time
}

func (*postponeWatchCmd) Kind() string { return "reconcile.postpone_watch" }

func (c *postponeWatchCmd) Apply(tx *store.Tx) (any, error) {
	return nil, tx.PostponeWatch(c.MerchantOrderID, c.Next)
}

// driftRecorded is what recordDriftCmd did to the currency's finding.
// Waiting: the drift is unexplained but has not been for Grace checks yet
// (Checks so far), so no finding opened. HeldOpen: the books agree, but
// the open finding is one a person reopened, so it stays open for them.
type driftRecorded struct {
	Opened, Resolved, Waiting, HeldOpen bool
	Checks                              int
}

// recordDriftCmd stores a balance comparison and opens or resolves the
// currency's balance_drift finding. Its entries with Grace set (kind
// ".2") open a finding only once Grace consecutive comparisons left drift
// unexplained; the old kind (Grace zero) opened one at the first.
type recordDriftCmd struct {
	Currency string
	Drift    store.BalanceDrift
	Grace    int `json:",omitempty"`
}

func (c *recordDriftCmd) Kind() string {
	if c.Grace == 0 {
		return "reconcile.record_drift"
	}
	return "reconcile.record_drift.2"
}

func (c *recordDriftCmd) Apply(tx *store.Tx) (any, error) {
	d := c.Drift
	var out driftRecorded
	if _, err := tx.InsertBalanceDrift(d); err != nil {
		return nil, err
	}
	var err error
	switch {
	case d.WithinTolerance:
		// A comparison that agrees opens where the books last agreed or a
		// person accepted a gap; after a person reopened the finding of
		// such a gap, a later agreeing comparison says nothing about it.
		if out.HeldOpen, err = tx.ReopenedFinding(store.FindingBalanceDrift, c.Currency); err != nil || out.HeldOpen {
			return out, err
		}
		out.Resolved, err = tx.ResolveFinding(store.FindingBalanceDrift, c.Currency)
	case c.Grace > 1:
		if out.Checks, err = tx.UnexplainedStreak(c.Currency, c.Grace); err != nil {
			return out, err
		}
		if out.Checks < c.Grace {
			out.Waiting = true
			return out, nil
		}
		fallthrough
	default:
		_, out.Opened, err = tx.OpenFinding(store.FindingBalanceDrift, c.Currency, d.Detail)
	}
	return out, err
}

// errorText is err's message, empty for nil.
func errorText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

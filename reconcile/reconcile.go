package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shopspring/decimal"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"orderd/provider"
	"orderd/store"
)

// Job names, as recorded in reconcile_runs, used in metrics and accepted by
// Run.
const (
	JobStale      = "stale"
	JobDoubt      = "doubt"
	JobBalances   = "balances"
	JobRequisites = "requisites"
	JobReport     = "report"
	// JobAll runs doubt, stale, requisites and balances in that order.
	JobAll = "all"
)

// Off is the schedule that disables a job.
const Off = "off"

// Defaults for zero Config fields.
const (
	DefaultStaleAfter       = 5 * time.Minute
	DefaultGiveUpAfter      = 24 * time.Hour
	DefaultDoubtMinAge      = time.Minute
	DefaultBoundaryWindow   = 10 * time.Second
	DefaultConcurrency      = 4
	DefaultUnresolvedAfter  = time.Hour
	DefaultBackoffBase      = time.Minute
	DefaultBackoffMax       = time.Hour
	DefaultRequisiteOverlap = 10 * time.Minute
	DefaultPageSize         = 500
	DefaultDriftGrace       = 2
	DefaultDriftPolls       = 50
)

// Store is what the reconciler needs of orderd's store, one small
// interface per concern. *store.Store satisfies it.
type Store interface {
	WriteStore
	RunStore
	StaleStore
	DoubtStore
	BalanceStore
	RequisiteStore
}

// WriteStore is the one write path and the store's commands.
type WriteStore interface {
	Exec(ctx context.Context, cmd store.Command) (any, error)
	Apply(ctx context.Context, obs store.Observation) (store.Result, error)
}

// RunStore records runs and counts open findings.
type RunStore interface {
	StartReconcileRun(ctx context.Context, job string, at time.Time) (int64, error)
	FinishReconcileRun(ctx context.Context, id int64, at time.Time, counts map[string]int, runErr string) error
	OpenFindingCounts(ctx context.Context) (map[string]int, error)
}

// StaleStore queues the orders and watches to poll.
type StaleStore interface {
	DueOrders(ctx context.Context, now, changedBefore time.Time, after store.DueCursor, limit int) ([]store.DueOrder, error)
	CountDueOrders(ctx context.Context, now, changedBefore time.Time) (int, error)
	RefundingOrders(ctx context.Context, now, pendingSince time.Time, afterID int64, limit int) ([]store.DueOrder, error)
	ResolveSettledStuckOrders(ctx context.Context) (int, error)
	DueWatches(ctx context.Context, now time.Time, after store.DueCursor, limit int) ([]store.DueWatch, error)
}

// DoubtStore holds the gateway's attempts.
type DoubtStore interface {
	DueInDoubtAttempts(ctx context.Context, olderThan, now time.Time, limit int) ([]store.Attempt, error)
	SettleAttemptCreated(ctx context.Context, id int64, obs store.Observation) error
	SettleAttemptNotCreated(ctx context.Context, id int64) error
	PostponeAttempt(ctx context.Context, id int64, next time.Time) error
}

// BalanceStore holds snapshots, the ledger and what is in flight.
type BalanceStore interface {
	UpdateLedger(ctx context.Context, batch int) (int, error)
	InsertBalanceSnapshot(ctx context.Context, currency string, amount decimal.Decimal, at time.Time, runID int64) (store.BalanceSnapshot, error)
	DriftOpening(ctx context.Context, closing store.BalanceSnapshot) (store.BalanceSnapshot, bool, error)
	LedgerSum(ctx context.Context, currency string, from, to time.Time) (decimal.Decimal, int, error)
	LedgerMovements(ctx context.Context, currency string, from, to time.Time) ([]store.LedgerMovement, error)
	PendingMovements(ctx context.Context, currency string, limit int) ([]store.PendingMovement, error)
	UnsettledCreations(ctx context.Context) ([]store.UnsettledCreation, error)
	GatewayOrdersInFlight(ctx context.Context, currency string, limit int) ([]store.PendingMovement, error)
	PreviousBalanceDrift(ctx context.Context, currency string, closingID int64) (store.BalanceDrift, bool, error)
	AgreedAt(ctx context.Context, snapshot store.BalanceSnapshot) (time.Time, bool, error)
	Settlements(ctx context.Context, merchantOrderIDs []string) (map[string]store.Settlement, error)
}

// RequisiteStore holds the requisites to sweep.
type RequisiteStore interface {
	GatewayRequisites(ctx context.Context) ([]string, error)
	Requisites(ctx context.Context, activeOnly bool) ([]store.Requisite, error)
	RequisitesToSweep(ctx context.Context) ([]store.Requisite, error)
	MarkRequisiteSwept(ctx context.Context, id string, at time.Time, recovered int) error
}

var _ Store = (*store.Store)(nil)

// Client is what the reconciler calls at the provider. *provider.Client
// satisfies it; its Limiter paces every call (see NewLimiter).
type Client interface {
	GetStatus(ctx context.Context, merchantOrderID string) (*provider.Order, json.RawMessage, error)
	Balances(ctx context.Context) ([]provider.Balance, error)
	RequisiteOrders(ctx context.Context, req provider.RequisiteOrdersRequest) ([]provider.RawOrder, error)
}

var _ Client = (*provider.Client)(nil)

// Schedules are robfig/cron specs evaluated in UTC ("@every 1m",
// "0 1 * * *"), or Off. An empty spec is Off too.
type Schedules struct {
	Stale      string
	Doubt      string
	Balances   string
	Requisites string
	// Report is used by the job registered under JobReport with AddJob.
	Report string
}

// Progress reports how far a run is: Done of Total items (Total 0 when
// unknown).
type Progress struct {
	Job   string
	Done  int
	Total int
}

// Config configures a Reconciler. Zero fields take the defaults above.
type Config struct {
	// StaleAfter: an order in new or processing whose last change is
	// older than this is polled.
	StaleAfter time.Duration
	// GiveUpAfter: an order unchanged for this long gets a stuck_order
	// finding (it is still polled, with capped backoff); a watch whose
	// order the provider still does not know after this long gets a
	// watch_not_found finding.
	GiveUpAfter time.Duration
	// DoubtMinAge: an in-doubt creation is settled only once it is this
	// old, so a create still in flight is not declared absent.
	DoubtMinAge time.Duration
	// BoundaryWindow: completions this close to a balance snapshot are the
	// "boundary" part of a drift explanation. Zero means the default; a
	// negative window leaves the boundary part out.
	BoundaryWindow time.Duration
	// Concurrency bounds the provider calls in flight.
	Concurrency int
	// DriftTolerance is the unexplained drift allowed per lowercase
	// currency; a currency not listed allows none.
	DriftTolerance map[string]decimal.Decimal
	// DriftGrace is how many consecutive balance checks must leave an
	// amount unexplained before a balance_drift finding opens. Zero means
	// DefaultDriftGrace.
	DriftGrace int
	// DriftPolls bounds the get-status calls one balance check makes per
	// currency to explain a drift. Zero means DefaultDriftPolls.
	DriftPolls int
	// UnresolvedAfter: an in-doubt creation still unsettled this long after
	// it was made gets an unresolved_creation finding.
	UnresolvedAfter time.Duration
	// Schedules of the jobs, for Start.
	Schedules Schedules

	// BackoffBase and BackoffMax shape the per-order (and per-watch,
	// per-attempt) backoff after a check that changed nothing:
	// BackoffBase × 2^attempts, at most BackoffMax.
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// RequisiteOverlap is how far before its last sweep a requisite's next
	// sweep starts, so clock skew and late-listed orders are not missed.
	RequisiteOverlap time.Duration
	// PageSize is how many rows one due-orders query returns.
	PageSize int

	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives the reconciler's log lines; nil discards them.
	Logger *slog.Logger
	// Progress, when set, is called as a run advances (one call at a
	// time). The CLI draws a progress bar with it (see ProgressBar).
	Progress func(Progress)
	// TracerProvider makes a span of each run ("reconcile.<job>"), the
	// parent of its provider calls and of the events it queues; nil
	// (tracing off) makes none.
	TracerProvider trace.TracerProvider
}

// Reconciler runs the reconcile jobs, once (RunStale, RunDoubt,
// RunBalances, RunRequisites, RunAll) or on their schedules (Start, Stop).
// It is safe for concurrent use; jobs are idempotent, so two runs side by
// side (a scheduled one and the CLI) are harmless.
type Reconciler struct {
	cfg     Config
	store   Store
	client  Client
	metrics *Metrics
	log     *slog.Logger
	now     func() time.Time

	progressMu sync.Mutex

	sched scheduler
}

// New returns a Reconciler over st, calling the provider through client.
// metrics may be nil.
func New(cfg Config, st Store, client Client, metrics *Metrics) *Reconciler {
	if cfg.StaleAfter <= 0 {
		cfg.StaleAfter = DefaultStaleAfter
	}
	if cfg.GiveUpAfter <= 0 {
		cfg.GiveUpAfter = DefaultGiveUpAfter
	}
	if cfg.DoubtMinAge <= 0 {
		cfg.DoubtMinAge = DefaultDoubtMinAge
	}
	if cfg.BoundaryWindow < 0 {
		cfg.BoundaryWindow = 0
	} else if cfg.BoundaryWindow == 0 {
		cfg.BoundaryWindow = DefaultBoundaryWindow
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.UnresolvedAfter <= 0 {
		cfg.UnresolvedAfter = DefaultUnresolvedAfter
	}
	if cfg.BackoffBase <= 0 {
		cfg.BackoffBase = DefaultBackoffBase
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = DefaultBackoffMax
	}
	if cfg.RequisiteOverlap <= 0 {
		cfg.RequisiteOverlap = DefaultRequisiteOverlap
	}
	if cfg.DriftGrace <= 0 {
		cfg.DriftGrace = DefaultDriftGrace
	}
	if cfg.DriftPolls == 0 {
		cfg.DriftPolls = DefaultDriftPolls
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = DefaultPageSize
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	tol := make(map[string]decimal.Decimal, len(cfg.DriftTolerance))
	for k, v := range cfg.DriftTolerance {
		tol[strings.ToLower(k)] = v.Abs()
	}
	cfg.DriftTolerance = tol
	r := &Reconciler{
		cfg:     cfg,
		store:   st,
		client:  client,
		metrics: metrics,
		log:     cfg.Logger,
		now:     cfg.Now,
	}
	r.sched.init(r)
	return r
}

// Summary is what one run of a job did.
type Summary struct {
	Job        string
	RunID      int64
	StartedAt  time.Time
	FinishedAt time.Time
	// Counts says what the run did; the keys depend on the job (see the
	// Run* methods).
	Counts map[string]int
	// Error is the run's error, empty on success.
	Error string
}

// Duration is how long the run took.
func (s Summary) Duration() time.Duration { return s.FinishedAt.Sub(s.StartedAt) }

// Results of a run, as Summary.Result names them.
const (
	// ResultOK: the run finished and every item it took up was handled.
	ResultOK = "ok"
	// ResultPartial: the run finished, but some items failed (its
	// "errors" count); they are taken up again after their backoff.
	ResultPartial = "partial"
	// ResultFailed: the run stopped with an error.
	ResultFailed = "failed"
)

// Result says how the run went: ResultFailed when it has an Error,
// ResultPartial when items failed (Counts["errors"] > 0), else ResultOK.
func (s Summary) Result() string {
	switch {
	case s.Error != "":
		return ResultFailed
	case s.Counts["errors"] > 0:
		return ResultPartial
	}
	return ResultOK
}

// Run runs one job by name (JobStale, JobDoubt, JobBalances,
// JobRequisites, or JobAll for all four) and returns the summaries of the
// runs it made.
func (r *Reconciler) Run(ctx context.Context, job string) ([]Summary, error) {
	var fn func(context.Context) (Summary, error)
	switch job {
	case JobAll:
		return r.RunAll(ctx)
	case JobStale:
		fn = r.RunStale
	case JobDoubt:
		fn = r.RunDoubt
	case JobBalances:
		fn = r.RunBalances
	case JobRequisites:
		fn = r.RunRequisites
	default:
		return nil, fmt.Errorf("unknown job %q (want %s, %s, %s, %s or %s)", job,
			JobStale, JobDoubt, JobBalances, JobRequisites, JobAll)
	}
	s, err := fn(ctx)
	return []Summary{s}, err
}

// RunAll runs doubt, stale, requisites and balances once, in that order
// (settled creations and recovered orders first, so the balance comparison
// sees them), continuing after a failed job. The error joins the jobs'
// errors.
func (r *Reconciler) RunAll(ctx context.Context) ([]Summary, error) {
	var (
		out  []Summary
		errs []error
	)
	for _, fn := range []func(context.Context) (Summary, error){r.RunDoubt, r.RunStale, r.RunRequisites, r.RunBalances} {
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err())
			break
		}
		s, err := fn(ctx)
		out = append(out, s)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}

// counts is a run's tally, safe for the workers to bump concurrently.
type counts struct {
	mu sync.Mutex
	m  map[string]int
}

func newCounts(keys ...string) *counts {
	c := &counts{m: make(map[string]int, len(keys))}
	for _, k := range keys {
		c.m[k] = 0
	}
	return c
}

func (c *counts) add(key string, n int) {
	c.mu.Lock()
	c.m[key] += n
	c.mu.Unlock()
}

func (c *counts) get(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[key]
}

func (c *counts) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.m))
	for k, v := range c.m {
		out[k] = v
	}
	return out
}

// record runs fn as one recorded run of job: a reconcile_runs row before
// and after, the metrics, and the findings gauge refreshed.
func (r *Reconciler) record(ctx context.Context, job string, c *counts, fn func(ctx context.Context, runID int64) error) (Summary, error) {
	s := Summary{Job: job, StartedAt: r.now().UTC()}
	if tp := r.cfg.TracerProvider; tp != nil {
		var span trace.Span
		ctx, span = tp.Tracer("orderd/reconcile").Start(ctx, "reconcile."+job)
		defer func() {
			span.SetAttributes(attribute.Int64("orderd.reconcile.run", s.RunID))
			if s.Error != "" {
				span.SetStatus(codes.Error, s.Error)
			}
			span.End()
		}()
	}
	log := r.log.With("job", job)
	id, err := r.store.StartReconcileRun(ctx, job, s.StartedAt)
	if err != nil {
		s.FinishedAt = r.now().UTC()
		s.Error = err.Error()
		s.Counts = c.snapshot()
		r.metrics.observeRun(s)
		return s, fmt.Errorf("%s: %w", job, err)
	}
	s.RunID = id
	log.Debug("reconcile run started", "run", id)
	runErr := fn(ctx, id)
	s.FinishedAt = r.now().UTC()
	s.Counts = c.snapshot()
	if runErr != nil {
		s.Error = runErr.Error()
	}
	// The run's own context may be cancelled (shutdown); the record of
	// how it ended is still written.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := r.store.FinishReconcileRun(fctx, id, s.FinishedAt, s.Counts, s.Error); err != nil {
		log.Warn("record reconcile run", "run", id, "err", err)
	}
	r.metrics.observeRun(s)
	r.refreshFindings(fctx)
	if runErr != nil {
		log.Warn("reconcile run failed", "run", id, "elapsed", s.Duration(), "counts", s.Counts, "err", runErr)
		return s, fmt.Errorf("%s: %w", job, runErr)
	}
	log.Info("reconcile run finished", "run", id, "elapsed", s.Duration(), "counts", s.Counts)
	return s, nil
}

// refreshFindings sets the open-findings gauge from the store.
func (r *Reconciler) refreshFindings(ctx context.Context) {
	if r.metrics == nil {
		return
	}
	m, err := r.store.OpenFindingCounts(ctx)
	if err != nil {
		r.log.Warn("count open findings", "err", err)
		return
	}
	r.metrics.setFindings(m)
}

// progress reports one step of a run, serialised for the callback.
type progress struct {
	r     *Reconciler
	job   string
	total int
	done  atomic.Int64
}

func (r *Reconciler) newProgress(job string, total int) *progress {
	p := &progress{r: r, job: job, total: total}
	p.report(0)
	return p
}

func (p *progress) step() { p.report(int(p.done.Add(1))) }

func (p *progress) report(done int) {
	if p.r.cfg.Progress == nil {
		return
	}
	p.r.progressMu.Lock()
	defer p.r.progressMu.Unlock()
	total := p.total
	if total > 0 && done > total {
		total = done
	}
	p.r.cfg.Progress(Progress{Job: p.job, Done: done, Total: total})
}

// backoff is the wait after attempts inconclusive checks:
// BackoffBase × 2^attempts, at most BackoffMax.
func (r *Reconciler) backoff(attempts int) time.Duration {
	d := r.cfg.BackoffBase
	for range max(attempts, 0) {
		if d >= r.cfg.BackoffMax/2 {
			return r.cfg.BackoffMax
		}
		d *= 2
	}
	return min(d, r.cfg.BackoffMax)
}

// pool runs fn over the items next produces, page by page, on
// cfg.Concurrency workers; it returns when every item is done or ctx ends,
// with next's error if it failed. next returns an empty page at the end.
func pool[T any](ctx context.Context, workers int, next func(ctx context.Context) ([]T, error), fn func(ctx context.Context, item T)) error {
	items := make(chan T, workers*2)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for it := range items {
				if ctx.Err() != nil {
					continue // drain without working
				}
				fn(ctx, it)
			}
		})
	}
	var err error
feed:
	for ctx.Err() == nil {
		page, perr := next(ctx)
		if perr != nil {
			err = perr
			break
		}
		if len(page) == 0 {
			break
		}
		for _, it := range page {
			select {
			case items <- it:
			case <-ctx.Done():
				break feed
			}
		}
	}
	close(items)
	wg.Wait()
	if err == nil {
		err = ctx.Err()
	}
	return err
}

// isNotFound reports whether err is the provider's ORDER_NOT_FOUND, which
// proves an order does not exist.
func isNotFound(err error) bool { return provider.ErrorCode(err) == provider.CodeOrderNotFound }

// outcomeConflict is applyPolled's outcome for an order the write path
// refused because it contradicts a stored identity: nothing of it was
// stored, and an identity_conflict finding was opened instead.
const outcomeConflict store.Outcome = "conflict"

// applyPolled applies one polled order inside tx and, when a poll
// disagrees with what a webhook said about the status (reporting an older
// status than the stored one), opens a mismatch finding with both
// versions. Final-status conflicts and amount disagreements are found by
// the write path itself. An order that contradicts a stored identity is
// not an error of the command: it opens an identity_conflict finding and
// comes back as outcomeConflict, so the caller's bookkeeping (backoff,
// the watch) still commits. An order that applies resolves its
// merchantOrderId's identity_conflict finding, if one is open. legacy
// applies the rules from before identity_conflict findings, for the log
// entries written with them: a conflict is the command's error.
//
// asked is when the poll's question was sent (zero when the command does
// not say). The provider answered with its state at some moment after
// that, so a poll asked before the stored state arrived may well predate
// the change a webhook brought meanwhile: its older status is news that
// came late, not a disagreement, and opens no finding. Only a poll asked
// after the webhook's state was stored, which still reports an older
// status, is the provider contradicting itself.
func applyPolled(tx *store.Tx, obs store.Observation, asked time.Time, legacy bool) (store.Result, error) {
	res, _, err := applyPoll(tx, obs, asked, legacy)
	return res, err
}

// applyPoll is applyPolled, also saying whether the poll disagreed with
// a webhook (a mismatch finding is open for it).
func applyPoll(tx *store.Tx, obs store.Observation, asked time.Time, legacy bool) (store.Result, bool, error) {
	res, err := tx.ApplyObservation(obs)
	if errors.Is(err, store.ErrConflict) && !legacy {
		if _, err := tx.RecordIdentityConflict(obs, err.Error()); err != nil {
			return store.Result{}, false, err
		}
		return store.Result{Outcome: outcomeConflict}, false, nil
	}
	if err != nil {
		return res, false, err
	}
	o := obs.Order
	if !legacy {
		if _, err := tx.ResolveFinding(store.FindingIdentityConflict, o.MerchantOrderID); err != nil {
			return res, false, err
		}
	}
	if res.Outcome != store.OutcomeStale || o.Status == res.Previous ||
		(o.Status.IsFinal() && res.Previous.IsFinal()) {
		return res, false, nil
	}
	cur, err := tx.OrderState(o.ID)
	if err != nil {
		return res, false, err
	}
	if cur.Source != store.SourceWebhook {
		return res, false, nil
	}
	if !asked.IsZero() && asked.UnixMilli() <= cur.UpdatedAt.UnixMilli() {
		return res, false, nil // asked before the webhook's state arrived
	}
	detail := mismatchDetail{
		Reason:          "poll reports an older status than the webhook",
		OrderID:         o.ID,
		MerchantOrderID: o.MerchantOrderID,
		Stored:          mismatchVersion{Source: cur.Source, Status: cur.Status, Order: cur.Raw},
		Observed:        mismatchVersion{Source: obs.Source, Status: o.Status, Order: json.RawMessage(obs.Raw)},
	}
	if _, _, err := tx.OpenFinding(store.FindingMismatch, o.ID, detail); err != nil {
		return res, false, err
	}
	return res, true, nil
}

// mismatchDetail has the shape of the write path's mismatch findings.
type mismatchDetail struct {
	Reason          string          `json:"reason"`
	OrderID         string          `json:"orderId"`
	MerchantOrderID string          `json:"merchantOrderId"`
	Stored          mismatchVersion `json:"stored"`
	Observed        mismatchVersion `json:"observed"`
}

type mismatchVersion struct {
	Source store.Source    `json:"source"`
	Status provider.Status `json:"status"`
	Order  json.RawMessage `json:"order"`
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"
	"golang.org/x/time/rate"
)

// NewLimiter returns the token bucket every provider call waits on:
// perSecond requests per second with burst tokens (at least 1). Put it on
// provider.Options.Limiter of the one client that the reconciler and the
// gateway share, so that together they never exceed the rate.
func NewLimiter(perSecond float64, burst int) *rate.Limiter {
	return rate.NewLimiter(rate.Limit(perSecond), max(burst, 1))
}

// ValidSchedule reports whether spec is Off, empty, or a cron spec the
// scheduler accepts (five fields or a descriptor such as "@every 1m").
func ValidSchedule(spec string) error {
	if isOff(spec) {
		return nil
	}
	_, err := cron.ParseStandard(spec)
	return err
}

func isOff(spec string) bool {
	s := strings.TrimSpace(spec)
	return s == "" || strings.EqualFold(s, Off)
}

// ScheduledJob is a job as the scheduler holds it.
type ScheduledJob struct {
	Name string
	Spec string
	// Next is the next run time (UTC); zero before Start.
	Next time.Time
}

// scheduler runs the jobs on their cron specs.
type scheduler struct {
	r *Reconciler

	mu      sync.Mutex
	jobs    []schedJob
	cron    *cron.Cron
	ids     map[string]cron.EntryID
	ctx     context.Context
	cancel  context.CancelFunc
	started bool
}

type schedJob struct {
	name, spec string
	fn         func(ctx context.Context) error
}

func (s *scheduler) init(r *Reconciler) {
	s.r = r
	add := func(name, spec string, fn func(context.Context) (Summary, error)) {
		s.jobs = append(s.jobs, schedJob{name: name, spec: spec, fn: func(ctx context.Context) error {
			_, err := fn(ctx)
			return err
		}})
	}
	sc := r.cfg.Schedules
	add(JobStale, sc.Stale, r.RunStale)
	add(JobDoubt, sc.Doubt, r.RunDoubt)
	add(JobBalances, sc.Balances, r.RunBalances)
	add(JobRequisites, sc.Requisites, r.RunRequisites)
}

// AddJob registers another job (the finance report under JobReport, with
// Schedules.Report) to run on spec alongside the reconcile jobs. Each run
// is recorded in reconcile_runs like theirs and gets a context that Stop
// cancels. A spec of Off (or empty) registers nothing. AddJob may be
// called before or after Start; a name already registered is an error.
func (r *Reconciler) AddJob(name, spec string, fn func(ctx context.Context) error) error {
	if name == "" || fn == nil {
		return errors.New("add job: name and function are required")
	}
	if err := ValidSchedule(spec); err != nil {
		return fmt.Errorf("add job %s: schedule %q: %w", name, spec, err)
	}
	s := &r.sched
	s.mu.Lock()
	defer s.mu.Unlock()
	if slices.ContainsFunc(s.jobs, func(j schedJob) bool { return j.name == name }) {
		return fmt.Errorf("add job %s: already registered", name)
	}
	j := schedJob{name: name, spec: spec, fn: func(ctx context.Context) error {
		c := newCounts()
		_, err := r.record(ctx, name, c, func(ctx context.Context, _ int64) error { return fn(ctx) })
		return err
	}}
	s.jobs = append(s.jobs, j)
	if s.started {
		return s.scheduleLocked(j)
	}
	return nil
}

// Start schedules every job whose spec is not Off, in UTC, and returns.
// Each run gets a context derived from ctx that Stop cancels. Jobs are
// wrapped so that a panic is logged and recovered and a run still going
// when its next time comes is skipped. A spec that does not parse is an
// error naming the job, and nothing is started.
func (r *Reconciler) Start(ctx context.Context) error {
	s := &r.sched
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errors.New("reconciler already started")
	}
	for _, j := range s.jobs {
		if err := ValidSchedule(j.spec); err != nil {
			return fmt.Errorf("reconcile.schedules.%s: %q: %w", j.name, j.spec, err)
		}
	}
	// The reconciler's logger is already tagged component=reconcile; the
	// scheduler's lines say "cron" in their message rather than in a
	// second component key.
	logger := cronLogger{r.log}
	s.cron = cron.New(
		cron.WithLocation(time.UTC),
		cron.WithLogger(logger),
		cron.WithChain(cron.Recover(logger), cron.SkipIfStillRunning(logger)),
	)
	s.ids = map[string]cron.EntryID{}
	s.ctx, s.cancel = context.WithCancel(ctx)
	for _, j := range s.jobs {
		if err := s.scheduleLocked(j); err != nil {
			s.cancel()
			return err
		}
	}
	s.cron.Start()
	s.started = true
	return nil
}

func (s *scheduler) scheduleLocked(j schedJob) error {
	if isOff(j.spec) {
		s.r.log.Info("reconcile job off", "job", j.name)
		return nil
	}
	ctx := s.ctx
	id, err := s.cron.AddFunc(j.spec, func() {
		if ctx.Err() != nil {
			return
		}
		// The job records and logs its own outcome.
		_ = j.fn(ctx)
	})
	if err != nil {
		return fmt.Errorf("reconcile.schedules.%s: %q: %w", j.name, j.spec, err)
	}
	s.ids[j.name] = id
	s.r.log.Info("reconcile job scheduled", "job", j.name, "schedule", j.spec)
	return nil
}

// Jobs lists the scheduled jobs (those not Off) with their next run time,
// in registration order.
func (r *Reconciler) Jobs() []ScheduledJob {
	s := &r.sched
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []ScheduledJob
	for _, j := range s.jobs {
		if isOff(j.spec) {
			continue
		}
		sj := ScheduledJob{Name: j.name, Spec: j.spec}
		if s.started {
			if id, ok := s.ids[j.name]; ok {
				sj.Next = s.cron.Entry(id).Next
			}
		}
		out = append(out, sj)
	}
	return out
}

// Stop stops scheduling, cancels the context of the runs in progress and
// waits for them to return, or for ctx to end (then it returns ctx's
// error). Stop before Start, or twice, does nothing.
func (r *Reconciler) Stop(ctx context.Context) error {
	s := &r.sched
	s.mu.Lock()
	if !s.started {
		s.mu.Unlock()
		return nil
	}
	s.started = false
	c, cancel := s.cron, s.cancel
	s.mu.Unlock()

	cancel()
	done := c.Stop()
	select {
	case <-done.Done():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop reconciler: waiting for running jobs: %w", ctx.Err())
	}
}

// cronLogger adapts slog to cron.Logger. cron's info lines (wake, run,
// schedule) are debug noise; skips and panics matter.
type cronLogger struct{ l *slog.Logger }

func (c cronLogger) Info(msg string, kv ...any) {
	level := slog.LevelDebug
	if msg == "skip" {
		level, msg = slog.LevelInfo, "reconcile job still running, run skipped"
	} else {
		msg = "cron " + msg
	}
	c.l.Log(context.Background(), level, msg, kv...)
}

func (c cronLogger) Error(err error, msg string, kv ...any) {
	c.l.Error("cron "+msg, append(kv, "err", err)...)
}

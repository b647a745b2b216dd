package reconcile_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"orderd/reconcile"
)

func TestReconciler_Start_offSchedulesAreNotScheduled(t *testing.T) {
	tests := []struct {
		name      string
		schedules reconcile.Schedules
		report    string
		want      []string
	}{
		{"all off", reconcile.Schedules{Stale: "off", Doubt: "off", Balances: "off", Requisites: "off"}, "off", nil},
		{"empty is off", reconcile.Schedules{Doubt: "@every 30s"}, "", []string{"doubt"}},
		{"defaults", reconcile.Schedules{Stale: "@every 1m", Doubt: "@every 30s", Balances: "@every 15m", Requisites: "@every 5m"},
			"0 1 * * *", []string{"stale", "doubt", "balances", "requisites", "report"}},
		{"OFF in capitals", reconcile.Schedules{Stale: "OFF", Balances: "*/5 * * * *"}, "off", []string{"balances"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			rec := reconcile.New(reconcile.Config{Schedules: tt.schedules, Now: e.clock.Now}, e.st, e.client, nil)
			if err := rec.AddJob(reconcile.JobReport, tt.report, func(context.Context) error { return nil }); err != nil {
				t.Fatal(err)
			}
			if err := rec.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			defer rec.Stop(context.Background())
			var got []string
			for _, j := range rec.Jobs() {
				got = append(got, j.Name)
				if j.Next.IsZero() || j.Next.Location() != time.UTC {
					t.Errorf("%s: next run %v, want a UTC time", j.Name, j.Next)
				}
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("scheduled %v, want %v", got, tt.want)
			}
		})
	}
}

func TestReconciler_Start_rejectsBadSchedule(t *testing.T) {
	e := newEnv(t, envOptions{})
	rec := reconcile.New(reconcile.Config{Schedules: reconcile.Schedules{Stale: "every minute"}}, e.st, e.client, nil)
	err := rec.Start(t.Context())
	if err == nil || !strings.Contains(err.Error(), "reconcile.schedules.stale") {
		t.Fatalf("Start = %v, want an error naming reconcile.schedules.stale", err)
	}
	if jobs := rec.Jobs(); len(jobs) != 1 || !jobs[0].Next.IsZero() {
		t.Fatalf("jobs after a failed start = %+v", jobs)
	}
	if err := rec.AddJob("report", "@daily at one", func(context.Context) error { return nil }); err == nil {
		t.Fatal("AddJob accepted a bad spec")
	}
}

func TestReconciler_Stop_waitsForRunningJob(t *testing.T) {
	e := newEnv(t, envOptions{})
	rec := reconcile.New(reconcile.Config{Now: e.clock.Now}, e.st, e.client, nil)
	started := make(chan struct{})
	var finished atomic.Bool
	err := rec.AddJob("slow", "@every 1s", func(ctx context.Context) error {
		select {
		case started <- struct{}{}:
		default:
		}
		<-ctx.Done()
		// Cleaning up takes a while after the cancellation.
		time.Sleep(300 * time.Millisecond)
		finished.Store(true)
		return ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("the job did not start")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := rec.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if !finished.Load() {
		t.Fatal("Stop returned before the running job finished")
	}
	runs, err := e.st.ReconcileRuns(t.Context(), "slow", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].FinishedAt.IsZero() || !strings.Contains(runs[0].Error, context.Canceled.Error()) {
		t.Fatalf("recorded runs = %+v", runs)
	}
}

func TestReconciler_Stop_givesUpWithItsContext(t *testing.T) {
	e := newEnv(t, envOptions{})
	rec := reconcile.New(reconcile.Config{Now: e.clock.Now}, e.st, e.client, nil)
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	defer close(release)
	if err := rec.AddJob("stubborn", "@every 1s", func(ctx context.Context) error {
		started <- struct{}{}
		<-release // ignores its context
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := rec.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	<-started
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if err := rec.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop = %v, want the deadline", err)
	}
}

func TestReconciler_Start_runsScheduledJobs(t *testing.T) {
	e := newEnv(t, envOptions{})
	rec := reconcile.New(reconcile.Config{
		Schedules: reconcile.Schedules{Stale: "@every 1s", Doubt: "off", Balances: "off", Requisites: "off"},
		Now:       e.clock.Now,
	}, e.st, e.client, nil)
	if err := rec.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		runs, err := e.st.ReconcileRuns(t.Context(), reconcile.JobStale, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) > 0 && !runs[0].FinishedAt.IsZero() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no stale run recorded within 5s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := rec.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if runs, _ := e.st.ReconcileRuns(t.Context(), reconcile.JobDoubt, 10); len(runs) != 0 {
		t.Fatalf("the doubt job is off but ran %d times", len(runs))
	}
}

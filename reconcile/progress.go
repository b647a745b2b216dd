package reconcile

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// ProgressBar draws Progress updates as a one-line bar on a terminal:
//
//	stale      [##########----------]   512/1024  50%
//
// It redraws at most every 100 ms (and always when a job starts or ends),
// so many updates cost little. Use its Update as Config.Progress and call
// Done when the runs are over. Only use it when w is a terminal; the line
// is rewritten with carriage returns.
type ProgressBar struct {
	// Now is the clock the redraw throttle reads; nil means time.Now.
	Now func() time.Time

	w     io.Writer
	width int

	mu    sync.Mutex
	last  time.Time
	job   string
	drawn bool
}

// NewProgressBar returns a bar that draws on w.
func NewProgressBar(w io.Writer) *ProgressBar {
	return &ProgressBar{w: w, width: 24}
}

// Update draws p.
func (b *ProgressBar) Update(p Progress) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	if b.Now != nil {
		now = b.Now()
	}
	newJob := p.Job != b.job
	finished := p.Total > 0 && p.Done >= p.Total
	if !newJob && !finished && now.Sub(b.last) < 100*time.Millisecond {
		return
	}
	if newJob && b.drawn {
		fmt.Fprintln(b.w)
	}
	b.job, b.last, b.drawn = p.Job, now, true
	fmt.Fprintf(b.w, "\r%-10s %s", p.Job, b.bar(p))
}

func (b *ProgressBar) bar(p Progress) string {
	if p.Total <= 0 {
		return fmt.Sprintf("%d done", p.Done)
	}
	filled := min(b.width*p.Done/p.Total, b.width)
	return fmt.Sprintf("[%s%s] %*d/%d %3d%%", strings.Repeat("#", filled), strings.Repeat("-", b.width-filled),
		len(fmt.Sprint(p.Total)), p.Done, p.Total, 100*p.Done/p.Total)
}

// Done ends the bar's line.
func (b *ProgressBar) Done() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.drawn {
		fmt.Fprintln(b.w)
		b.drawn = false
		b.job = ""
	}
}

// WriteSummaries prints one line per run: job, result, duration and the
// non-zero counts, e.g.
//
//	stale       ok       1.204s  checked=10 changed=3 unchanged=7
//	doubt       partial  0.310s  due=4 created=2 errors=2
//	balances    failed   0.051s  currencies=1  error: provider: AUTHENTICATION_FAILED
//
// The result is one of Summary.Result's.
func WriteSummaries(w io.Writer, sums []Summary) error {
	for _, s := range sums {
		result := s.Result()
		var b strings.Builder
		fmt.Fprintf(&b, "%-11s %-7s %7.3fs ", s.Job, result, s.Duration().Seconds())
		for _, k := range sortedKeys(s.Counts) {
			if v := s.Counts[k]; v != 0 {
				fmt.Fprintf(&b, " %s=%d", k, v)
			}
		}
		if s.Error != "" {
			fmt.Fprintf(&b, "  error: %s", s.Error)
		}
		b.WriteByte('\n')
		if _, err := io.WriteString(w, b.String()); err != nil {
			return err
		}
	}
	return nil
}

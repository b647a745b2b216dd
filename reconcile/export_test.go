package reconcile

import "time"

// TimeAxis fits a chart's time axis to times within p, as the HTML
// report does, and returns its ends and its tick labels ("time date",
// the date only where it shows, "@end" when right-aligned).
func TimeAxis(p Period, times []time.Time) (from, to time.Time, ticks []string) {
	a := newTimeAxis(p, times)
	for _, t := range a.ticks() {
		s := t.Time
		if t.Date != "" {
			s += " " + t.Date
		}
		if t.Anchor == "end" {
			s += " @end"
		}
		ticks = append(ticks, s)
	}
	return a.from, a.to, ticks
}

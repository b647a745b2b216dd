package store_test

import (
	"slices"
	"strings"
	"testing"

	"orderd/store"
)

// TestStore_RequestPlans: no query the dashboard or an admin read runs
// costs in proportion to the orders, their history or the events. Each
// plan reads the tables through an index or the primary key (SEARCH), or
// walks one in key order to a LIMIT (the listings; SCAN only where named
// here) or to a bound, and never sorts or groups in a temporary B-tree.
func TestStore_RequestPlans(t *testing.T) {
	st, _ := openStore(t, store.Options{})
	plans, err := store.RequestPlans(t.Context(), st)
	if err != nil {
		t.Fatal(err)
	}
	// The walks to a LIMIT, by query: the history backwards by its key
	// for the recent orders, the orders by their key for a filtered page.
	walks := map[string][]string{
		"recent orders": {"SCAN h"},
		// The open findings are their own partial index.
		"open finding counts": {"SCAN findings USING INDEX findings_open", "SCAN findings USING COVERING INDEX findings_open"},
		// The cursor is a table of one row.
		"outbox stats": {"SCAN CONSTANT ROW", "SCAN outbox_cursor"},
		"odd status":   {"SCAN CONSTANT ROW"},
		"odd type":     {"SCAN CONSTANT ROW"},
	}
	// A filtered listing walks the orders by row id up to a bound (see
	// store.OrdersPage), however few match.
	bounded := []string{"orders by status", "orders by time"}
	// Sorts of a few rows: one order's history.
	sorts := map[string]bool{"order history": true}
	for _, name := range bounded {
		if !slices.Contains(plans[name], "SEARCH o USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)") {
			t.Errorf("%s does not stop its walk at a row id: %q", name, plans[name])
		}
	}
	for name, plan := range plans {
		t.Logf("%s:\n  %s", name, strings.Join(plan, "\n  "))
		for _, step := range plan {
			switch {
			case strings.Contains(step, "TEMP B-TREE") && !sorts[name]:
				t.Errorf("%s sorts or groups in a temporary B-tree: %q", name, step)
			case strings.HasPrefix(step, "SCAN") && !slices.Contains(walks[name], step):
				t.Errorf("%s scans a table: %q", name, step)
			}
		}
	}
}

package store

import (
	"path/filepath"
	"slices"
	"testing"
)

// localTables are each instance's own: no digest covers them, and a
// snapshot carries them as they are.
var localTables = []string{
	"store_meta",            // applied sequence, readiness heartbeat
	"log_identity",          // the log this database follows
	"log_entries",           // the hashes of the entries it applied
	"issued_digests",        // the first digest each report of an ended period issued here
	"background_migrations", // this database's own migration progress
	"schema_migrations",     // this database's schema
	"outbox_traces",         // traceparents, kept only by an instance that traces
}

// TestTables_everyTableReplicatedOrLocal: a table a migration adds is
// either derived from the log, and then in every state digest, or named
// here as one instance's own. A table in neither would escape the
// instances' comparison without anyone deciding so.
func TestTables_everyTableReplicatedOrLocal(t *testing.T) {
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "orderd.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(t.Context())
	rows, err := s.rdb.QueryContext(t.Context(), `SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
		replicated, local := slices.Contains(replicatedTables, name), slices.Contains(localTables, name)
		switch {
		case replicated && local:
			t.Errorf("table %s is both replicated and local", name)
		case !replicated && !local:
			t.Errorf("table %s is neither in replicatedTables (every state digest) nor named a local table", name)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, name := range append(slices.Clone(replicatedTables), localTables...) {
		if !slices.Contains(tables, name) {
			t.Errorf("table %s is listed but the schema has none", name)
		}
	}
}

package store

import (
	"database/sql"
	"path/filepath"
	"testing"
	"time"
)

// TestMigrateOutboxCursor upgrades databases written before the outbox
// cursor (migration 5), whose relay stamped published_at on every event:
// the cursor starts just below the first unpublished event, and the events
// after it that were stamped are not sent again.
func TestMigrateOutboxCursor(t *testing.T) {
	tests := []struct {
		name       string
		stamped    []bool // published_at set, for seqs 1, 2, ...
		wantCursor int64
		wantSeqs   []int64
	}{
		{"none yet", nil, 0, nil},
		{"a gap", []bool{true, true, false, true, false, false}, 2, []int64{3, 5, 6}},
		{"all published", []bool{true, true, true}, 3, nil},
		{"none published", []bool{false, false}, 0, []int64{1, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "old.db")
			writeVersion4(t, path, tt.stamped)

			s, err := Open(t.Context(), path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(t.Context())
			cursor, err := s.OutboxCursor(t.Context())
			if err != nil || cursor != tt.wantCursor {
				t.Errorf("cursor %d %v, want %d", cursor, err, tt.wantCursor)
			}
			evs, err := s.PendingEvents(t.Context(), 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			var seqs []int64
			for _, ev := range evs {
				seqs = append(seqs, ev.Seq)
			}
			if len(seqs) != len(tt.wantSeqs) {
				t.Fatalf("pending %v, want %v", seqs, tt.wantSeqs)
			}
			for i := range seqs {
				if seqs[i] != tt.wantSeqs[i] {
					t.Fatalf("pending %v, want %v", seqs, tt.wantSeqs)
				}
			}
			if backlog, _, err := s.OutboxStats(t.Context()); err != nil || backlog != int64(len(tt.wantSeqs)) {
				t.Errorf("backlog %d %v, want %d", backlog, err, len(tt.wantSeqs))
			}
			var idx int
			if err := s.rdb.QueryRowContext(t.Context(), `SELECT count(*) FROM sqlite_schema WHERE name = 'outbox_unpublished'`).Scan(&idx); err != nil || idx != 0 {
				t.Errorf("outbox_unpublished index still there (%d, %v)", idx, err)
			}
		})
	}
}

// writeVersion4 writes a database at schema version 4 whose outbox holds
// one event per entry of stamped, with published_at set where it says.
func writeVersion4(t *testing.T, path string, stamped []bool) {
	t.Helper()
	db, err := sql.Open("sqlite", writerDSN(path, false))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(t.Context(), `CREATE TABLE schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.version > 4 {
			break
		}
		if _, err := applyMigration(t.Context(), db, m, time.Now); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now().UnixMilli()
	for i, st := range stamped {
		var at any
		if st {
			at = now
		}
		if _, err := db.ExecContext(t.Context(), `INSERT INTO outbox (event_id, type, subject, event_subject, time, data, created_at, published_at)
			VALUES (?, 'finding.opened', 'findings.x', 'x', ?, '{}', ?, ?)`, "ev-"+string(rune('a'+i)), now, now, at); err != nil {
			t.Fatal(err)
		}
	}
}

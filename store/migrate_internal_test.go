package store

import (
	"bytes"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
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
	db := openAtVersion(t, path, 4)
	defer db.Close()
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

// openAtVersion creates a database at path with the migrations up to
// version applied, as an orderd of that schema left it.
func openAtVersion(t *testing.T, path string, version int) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", writerDSN(path, false))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(t.Context(), `CREATE TABLE schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.version > version {
			break
		}
		if _, err := applyMigration(t.Context(), db, m, time.Now); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

// TestMigrateHistoryKeepsBodies upgrades a database written before a
// webhook's body moved into its history row (migration 6): the order's
// first body stays in deliveries, where its event still reads it and a
// byte-identical repeat still counts; the next state's body is kept in its
// history row.
func TestMigrateHistoryKeepsBodies(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	processing := processingBody("p1", "m1")
	completed := bytes.Replace(processing, []byte(`"processing"`), []byte(`"completed"`), 1)
	webhook := func(raw []byte) Observation { return webhookObs(t, raw) }
	old := webhook(processing)
	fp, sum, now := old.Order.Fingerprint(), sha256.Sum256(processing), time.Now().UnixMilli()
	db := openAtVersion(t, path, 5)
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO orders (id, provider_id, merchant_order_id, type, status, fingerprint, state_id, learned_via,
			first_seen_at, updated_at) VALUES (1, 'p1', 'm1', 'payin', 'processing', ?, 1, 'webhook', ?, ?)`, []any{fp, now, now}},
		{`INSERT INTO deliveries (id, order_id, body_sha256, fingerprint, raw, first_received_at, last_received_at)
			VALUES (1, 1, ?, ?, ?, ?, ?)`, []any{sum[:], fp, processing, now, now}},
		{`INSERT INTO order_history (id, order_id, fingerprint, status, source, outcome, observed_at, delivery_id)
			VALUES (1, 1, ?, 'processing', 'webhook', 'new', ?, 1)`, []any{fp, now}},
		{`INSERT INTO outbox (event_id, type, subject, event_subject, time, merchant_order_id, learned_via, state_id, created_at)
			VALUES ('ev1', 'order.processing', 'orders.payin.processing', 'p1', ?, 'm1', 'webhook', 1, ?)`, []any{now, now}},
	} {
		if _, err := db.ExecContext(t.Context(), q.sql, q.args...); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(t.Context())
	for _, step := range []struct {
		obs  Observation
		want Outcome
	}{{webhook(processing), OutcomeDuplicate}, {webhook(completed), OutcomeChanged}} {
		if res, err := s.Apply(t.Context(), step.obs); err != nil || res.Outcome != step.want {
			t.Fatalf("apply: %s %v, want %s", res.Outcome, err, step.want)
		}
	}
	rows, err := s.rdb.QueryContext(t.Context(), `SELECT raw, delivery_id, history_id, times_seen FROM webhook_deliveries ORDER BY first_received_at, history_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var (
			raw                 string
			deliveryID, history sql.NullInt64
			times               int
		)
		if err := rows.Scan(&raw, &deliveryID, &history, &times); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s delivery=%v history=%v seen=%d", raw, deliveryID.Valid, history.Valid, times))
	}
	want := []string{
		string(processing) + " delivery=true history=false seen=2",
		string(completed) + " delivery=false history=true seen=1",
	}
	if !slices.Equal(got, want) {
		t.Errorf("kept bodies:\n got %q\nwant %q", got, want)
	}
	evs, err := s.PendingEvents(t.Context(), 0, 10)
	if err != nil || len(evs) != 2 {
		t.Fatalf("pending: %v %+v", err, evs)
	}
	for i, body := range [][]byte{processing, completed} {
		if !bytes.Equal(evs[i].Data, body) {
			t.Errorf("event %d data %s, want %s", i, evs[i].Data, body)
		}
	}
}

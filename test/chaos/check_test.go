//go:build chaos

package chaos_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	_ "modernc.org/sqlite"

	"orderd/store"
)

// eventsStream is the events stream (nats.stream's default).
const eventsStream = "ORDERD"

// event is what the checker needs of one message of the events stream.
type event struct {
	ID              string `json:"id"`
	Type            string `json:"type"`
	MerchantOrderID string `json:"merchantorderid"`
}

// connect opens a client to every node, for the checker's reads.
func connect(w *world) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(w.natsURLs(), nats.Timeout(2*time.Second))
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// streamState returns a stream's state; ok is false when it cannot be
// read.
func streamState(w *world, name string) (jetstream.StreamState, bool) {
	nc, js, err := connect(w)
	if err != nil {
		return jetstream.StreamState{}, false
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, name)
	if err != nil {
		return jetstream.StreamState{}, false
	}
	info, err := s.Info(ctx)
	if err != nil {
		return jetstream.StreamState{}, false
	}
	return info.State, true
}

// readEvents reads the whole events stream, message by message by its
// sequence (a direct get from the stream's leader, retried), which does
// not depend on a consumer surviving the cluster's recent elections.
func readEvents(w *world) ([]event, error) {
	nc, js, err := connect(w)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var s jetstream.Stream
	var info *jetstream.StreamInfo
	for {
		if s, err = js.Stream(ctx, eventsStream); err == nil {
			if info, err = s.Info(ctx); err == nil {
				break
			}
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("stream %s: %w", eventsStream, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	st := info.State
	out := make([]event, 0, st.Msgs)
	for seq := st.FirstSeq; seq <= st.LastSeq && st.Msgs > 0; seq++ {
		var m *jetstream.RawStreamMsg
		for {
			gctx, gcancel := context.WithTimeout(ctx, 5*time.Second)
			m, err = s.GetMsg(gctx, seq)
			gcancel()
			if err == nil || errors.Is(err, jetstream.ErrMsgNotFound) || ctx.Err() != nil {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // a deleted message: the stream's own hole, not ours to read
		}
		if err != nil {
			return nil, fmt.Errorf("event %d: %w", seq, err)
		}
		var e event
		if err := json.Unmarshal(m.Data, &e); err != nil {
			return nil, fmt.Errorf("event %d is not JSON: %v", seq, err)
		}
		out = append(out, e)
	}
	if uint64(len(out)) != st.Msgs {
		return nil, fmt.Errorf("read %d of the stream's %d events", len(out), st.Msgs)
	}
	return out, nil
}

// openRO opens an instance's SQLite file read-only.
func openRO(path string) (*sql.DB, error) {
	return sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(10000)")
}

// dbState is what the checker reads of one instance's database.
type dbState struct {
	orders   map[string]string // merchantOrderId -> status
	attempts map[string]bool   // merchantOrderIds with a gateway attempt
}

func readDB(path string) (dbState, error) {
	st := dbState{orders: map[string]string{}, attempts: map[string]bool{}}
	db, err := openRO(path)
	if err != nil {
		return st, err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, "SELECT merchant_order_id, status FROM orders")
	if err != nil {
		return st, err
	}
	for rows.Next() {
		var m, s string
		if err := rows.Scan(&m, &s); err != nil {
			rows.Close()
			return st, err
		}
		st.orders[m] = s
	}
	rows.Close()
	rows, err = db.QueryContext(ctx, "SELECT merchant_order_id FROM attempts WHERE origin = 'gateway'")
	if err != nil {
		return st, err
	}
	defer rows.Close()
	for rows.Next() {
		var m string
		if err := rows.Scan(&m); err != nil {
			return st, err
		}
		st.attempts[m] = true
	}
	return st, rows.Err()
}

// pendingEvents returns the outbox rows the leader has not yet published,
// and how many rows the outbox has.
func pendingEvents(path string) (pending, total int, err error) {
	db, err := openRO(path)
	if err != nil {
		return 0, 0, err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM outbox WHERE seq > (SELECT seq FROM outbox_cursor) AND published_at IS NULL").Scan(&pending); err != nil {
		return 0, 0, err
	}
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM outbox").Scan(&total); err != nil {
		return 0, 0, err
	}
	return pending, total, nil
}

// digest is the replicated tables' digest of a database and the log
// sequence it belongs to, read with the product's own store code.
func digest(path string) (string, uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := store.Open(ctx, path, store.Options{ReadOnly: true})
	if err != nil {
		return "", 0, err
	}
	defer st.Close(context.Background())
	return st.Digest(ctx)
}

// providerCalls reads every API call the fake provider recorded.
func providerCalls(w *world) ([]providerCall, error) {
	req, err := http.NewRequest(http.MethodGet, w.provURL+"/_control/calls", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", w.provKey)
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var env struct {
		Data []providerCall `json:"data"`
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /_control/calls: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		return nil, err
	}
	return env.Data, nil
}

// rank orders an order's states: a later state implies the earlier.
var rank = map[string]int{"processing": 1, "completed": 2}

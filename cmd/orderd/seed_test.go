package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/shopspring/decimal"

	"orderd/provider"
	"orderd/provider/providertest"
	"orderd/store"
)

// seedOrder renders order i of a single-node history as the provider
// sends it: a payin, processing or completed, with a refund when refund.
func seedOrder(i int, status string, refund bool) []byte {
	id := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
	txStatus, completed, target := status, "null", "null"
	if status == "completed" {
		completed = `"2026-03-01T10:00:05Z"`
		target = `{"amount":"10.00","currency":"brl"}`
	}
	txs := fmt.Sprintf(`{"id":"00000000-0000-4000-9000-%012d","type":"payin","status":%q,"authorized":{"amount":"10.00","currency":"brl"},"merchantWallet":{"amount":"9.50","currency":"brl"},"createdAt":"2026-03-01T10:00:00Z","completedAt":%s,"rejectReason":null}`,
		i, txStatus, completed)
	if refund {
		txs += fmt.Sprintf(`,{"id":"00000000-0000-4000-a000-%012d","type":"refund","status":"completed","amount":{"amount":"1.00","currency":"brl"},"createdAt":"2026-03-02T09:00:00Z","completedAt":"2026-03-02T09:00:00Z","rejectReason":null}`, i)
	}
	return fmt.Appendf(nil, `{"id":%q,"merchantOrderId":"seed-%d","type":"payin","createdAt":"2026-03-01T10:00:00Z","status":%q,"rejectReason":null,"merchantSourceWallet":null,"merchantTargetWallet":%s,"transactions":[%s]}`,
		id, i, status, target, txs)
}

// buildSingleNode writes orders [from, to) into the single-node database
// at path through the store's write path, as a year of single-node life
// would: a processing and a completed webhook per order, a refund on
// every 20th, a gateway attempt on every 10th, a quarantined body (and
// its finding) on every 25th, a watch on every 50th, a balance snapshot
// after every 100th, and a requisite.
func buildSingleNode(tb testing.TB, path string, from, to int) {
	tb.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	defer st.Close(ctx)
	webhook := func(raw []byte) error {
		o, err := provider.DecodeOrder(raw)
		if err != nil {
			return err
		}
		_, err = st.Apply(ctx, store.Observation{Source: store.SourceWebhook, Order: o, Raw: raw, ObservedAt: time.Now(),
			Delivery: &store.Delivery{RemoteAddr: "127.0.0.1:5555", Header: http.Header{"Signature": {"c2ln"}, "Content-Type": {"application/json"}}}})
		return err
	}
	one := func(i int) error {
		mid := fmt.Sprintf("seed-%d", i)
		if i%10 == 0 {
			a, _, err := st.BeginAttempt(ctx, store.NewAttempt{Kind: store.AttemptPayin, Origin: store.OriginGateway, MerchantOrderID: mid,
				IdempotencyKey: mid, Request: json.RawMessage(fmt.Sprintf(`{"merchantOrderId":%q}`, mid)), RequestHash: "h-" + mid, State: store.AttemptPending})
			if err != nil {
				return fmt.Errorf("begin attempt: %w", err)
			}
			if _, err := st.FinishAttempt(ctx, a.ID, store.AttemptOutcome{State: store.AttemptCreated, Response: json.RawMessage(`{}`)}); err != nil {
				return fmt.Errorf("finish attempt: %w", err)
			}
		}
		if err := webhook(seedOrder(i, "processing", false)); err != nil {
			return err
		}
		if err := webhook(seedOrder(i, "completed", false)); err != nil {
			return err
		}
		if i%20 == 0 {
			if err := webhook(seedOrder(i, "completed", true)); err != nil {
				return err
			}
		}
		if i%25 == 0 {
			if err := st.Quarantine(ctx, store.QuarantinedWebhook{Raw: []byte(`{"id":` + fmt.Sprint(i)), Header: http.Header{"Signature": {"c2ln"}},
				RemoteAddr: "127.0.0.1:5555", Reason: "unexpected end of JSON input", MerchantOrderID: mid, ReceivedAt: time.Now()}); err != nil {
				return fmt.Errorf("quarantine: %w", err)
			}
		}
		if i%50 == 0 {
			if err := st.AddWatch(ctx, store.Watch{MerchantOrderID: "watch-" + mid, Type: provider.OrderType("payin"), Reason: "test"}); err != nil {
				return err
			}
		}
		return nil
	}
	// Eight writers at once, as concurrent webhooks arrive.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := from + w; i < to; i += 8 {
				if err := one(i); err != nil {
					errs <- fmt.Errorf("order %d: %w", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
	for i := from; i < to; i += 100 {
		run, err := st.StartReconcileRun(ctx, "balances", time.Now())
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := st.InsertBalanceSnapshot(ctx, "brl", decimal.NewFromInt(int64(i)), time.Now(), run); err != nil {
			tb.Fatal(err)
		}
		if err := st.FinishReconcileRun(ctx, run, time.Now(), map[string]int{"snapshots": 1}, ""); err != nil {
			tb.Fatal(err)
		}
	}
	if err := st.UpsertRequisite(ctx, store.Requisite{ID: fmt.Sprintf("req-%d", from), Currency: "brl", Active: true, CreatedAt: time.Now()}); err != nil {
		tb.Fatal(err)
	}
}

// tableCounts counts the rows of every table a seed must carry over.
func tableCounts(t testing.TB, path string) map[string]int {
	t.Helper()
	st, err := store.Open(t.Context(), path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close(context.Background())
	out := map[string]int{}
	for _, table := range []string{"orders", "order_history", "deliveries", "outbox", "quarantine", "findings", "watches",
		"attempts", "reconcile_runs", "balance_snapshots", "requisites"} {
		var n int
		if err := st.DB().QueryRowContext(t.Context(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		out[table] = n
	}
	return out
}

// clusterYAML is the cluster section of an instance named node, with a
// lease of 2s unless extra names one.
func clusterYAML(node, extra string) string {
	ttl := "  lease_ttl: 2s\n"
	if strings.Contains(extra, "lease_ttl:") {
		ttl = ""
	}
	return fmt.Sprintf(`cluster:
  enabled: true
  node: %s
%s%s`, node, ttl, extra) + quietJobs
}

// natsYAML is the nats section every instance of these tests shares: the
// events stream replicated three times, and a duplicate window short
// enough that an event published again after it shows on the stream.
func natsYAML(url, extra string) string {
	return "  url: " + url + "\n  replicas: 3\n  duplicate_window: 1s\n" + extra
}

// startReplicaIn runs a replicated instance on the database in dir (which
// may not exist yet) and waits until it is ready.
func startReplicaIn(t testing.TB, dir, cfg, name string) *replicaDaemon {
	t.Helper()
	return startReplicaWithin(t, dir, cfg, name, 20*time.Second)
}

// startReplicaWithin is startReplicaIn with a bound on the start of its own.
func startReplicaWithin(t testing.TB, dir, cfg, name string, within time.Duration) *replicaDaemon {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &replicaDaemon{name: name, dir: dir, cancel: cancel, done: make(chan error, 1), log: &syncBuffer{}}
	go func() {
		r.done <- run(ctx, []string{"orderd", "run", "-config", cfg}, func(string) string { return "" }, nil, io.Discard, r.log)
	}()
	r.addrs = waitStartedWithin(t, r.log, r.done, within)
	waitReady(t, r.addrs.Admin, r.done)
	t.Cleanup(func() { r.stop(t) })
	return r
}

// streamEvents reads every message of the events stream: the count of
// each event id.
func streamEvents(t *testing.T, js jetstream.JetStream) map[string]int {
	t.Helper()
	ids := map[string]int{}
	s, err := js.Stream(t.Context(), "ORDERD")
	if err != nil {
		return ids
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatalf("events stream message %d: %v", seq, err)
		}
		ids[m.Header.Get(jetstream.MsgIDHeader)]++
	}
	return ids
}

// outboxIDs are the event ids of a database's outbox.
func outboxIDs(t testing.TB, path string) map[string]bool {
	t.Helper()
	st, err := store.Open(t.Context(), path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close(context.Background())
	rows, err := st.DB().QueryContext(t.Context(), "SELECT event_id FROM outbox")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	ids := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids[id] = true
	}
	return ids
}

// waitConverged waits until every instance has applied the log's end and
// their databases' replicated tables are equal; it returns the digest.
func waitConverged(t testing.TB, rs ...*replicaDaemon) string {
	t.Helper()
	return waitConvergedWithin(t, time.Minute, rs...)
}

// waitConvergedWithin is waitConverged with a bound of its own.
func waitConvergedWithin(t testing.TB, within time.Duration, rs ...*replicaDaemon) string {
	t.Helper()
	var digests []string
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		var seqs []uint64
		for _, r := range rs {
			st := clusterStatus(t, r.addrs.Admin)
			seqs = append(seqs, st.AppliedSeq)
			if st.Lag != 0 {
				seqs = nil
				break
			}
		}
		if len(seqs) != len(rs) {
			continue
		}
		digests = digests[:0]
		same := true
		for i, r := range rs {
			d, seq := digestOf(t, r.dir)
			digests = append(digests, d)
			same = same && seq == seqs[0] && d == digests[0] && (i == 0 || seqs[i] == seqs[0])
		}
		if same {
			return digests[0]
		}
	}
	t.Fatalf("the instances did not converge within %s: digests %v", within, digests)
	return ""
}

var seededRE = regexp.MustCompile(`^seeded log ([0-9a-f-]{36}) from (\S+): (\d+) orders, snapshot (\d+) bytes\n$`)

// TestClusterSeed_MovesSingleNode moves a single-node database with every
// kind of record into replicated mode: the seed carries every record, a
// second instance on an empty disk rebuilds the same database from the
// seed's snapshot, the events the single node published are not
// published again, and new changes publish once each. A second seed, a
// foreign backup and an instance with other settings are refused, and
// the events stream keeps its settings.
func TestClusterSeed_MovesSingleNode(t *testing.T) {
	const orders = 2000
	ec, fake := natsAndFake(t)
	js := jetStreamAt(t, ec.ClientURL())

	// A single node's life: records written, then published to the
	// platform's events stream by its relay.
	dirA := t.TempDir()
	dbA := filepath.Join(dirA, "orderd.db")
	buildSingleNode(t, dbA, 0, orders/2)
	single := daemonConfig(t, dirA, fake, natsYAML(ec.ClientURL(), ""), quietJobs)
	func() {
		ctx, cancel := context.WithCancel(context.Background())
		log := &syncBuffer{}
		done := make(chan error, 1)
		go func() {
			done <- run(ctx, []string{"orderd", "run", "-config", single}, func(string) string { return "" }, nil, io.Discard, log)
		}()
		waitStarted(t, log, done)
		want := len(outboxIDs(t, dbA))
		for deadline := time.Now().Add(60 * time.Second); len(streamEvents(t, js)) < want; time.Sleep(200 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the single node published %d of %d events", len(streamEvents(t, js)), want)
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("single node: %v", err)
		}
	}()
	published := streamEvents(t, js)
	// More life after the last publication: these events are the
	// cluster's to publish.
	buildSingleNode(t, dbA, orders/2, orders)
	before := tableCounts(t, dbA)
	// Past the duplicate window, an event published again would be
	// stored again.
	time.Sleep(1500 * time.Millisecond)

	cfgA := daemonConfig(t, dirA, fake, natsYAML(ec.ClientURL(), ""), clusterYAML("a", ""))
	res := runOrderd(t, nil, nil, "cluster", "seed", "-config", cfgA)
	m := seededRE.FindStringSubmatch(res.stdout)
	if res.code != 0 || m == nil {
		t.Fatalf("seed: exit %d\nstdout %q\nstderr %s", res.code, res.stdout, res.stderr)
	}
	logID := m[1]
	if m[2] != dbA || m[3] != fmt.Sprint(orders) {
		t.Errorf("seed said %q; want %s and %d orders", res.stdout, dbA, orders)
	}
	if after := tableCounts(t, dbA); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("the seed changed the records:\nbefore %v\nafter  %v", before, after)
	}

	t.Run("a second seed is refused", func(t *testing.T) {
		res := runOrderd(t, nil, nil, "cluster", "seed", "-config", cfgA)
		if res.code != 2 || !strings.Contains(res.stderr, "cluster.log_stream") || !strings.Contains(res.stderr, "snapshot") {
			t.Fatalf("exit %d, stderr %s; want 2 naming cluster.log_stream and the snapshot", res.code, res.stderr)
		}
	})

	// The seeded database carries on; an instance on an empty disk
	// restores the seed's snapshot.
	// a leads throughout, so no takeover publishes an event again: a
	// repeat on the stream can only come from the seed.
	a := startReplicaIn(t, dirA, cfgA, "a")
	waitLeading(t, a)
	dirB := t.TempDir()
	cfgB := daemonConfig(t, dirB, fake, natsYAML(ec.ClientURL(), ""), clusterYAML("b", ""))
	b := startReplicaIn(t, dirB, cfgB, "b")
	for _, r := range []*replicaDaemon{a, b} {
		if got := clusterLog(t, r.addrs.Admin); got != logID {
			t.Errorf("%s: GET /v1/cluster log %q, want %q", r.name, got, logID)
		}
	}

	// New life through both instances.
	for i := range 20 {
		to := a
		if i%2 == 1 {
			to = b
		}
		mid := fmt.Sprintf("after-%d", i)
		if _, err := fake.CreateOrder(providertest.NewOrder{MerchantOrderID: mid, Amount: "10.00", Currency: "brl",
			WebhookURL: "http://" + to.addrs.Webhooks + "/webhooks/orders"}); err != nil {
			t.Fatal(err)
		}
		if err := fake.Complete(mid); err != nil {
			t.Fatal(err)
		}
	}
	var want map[string]bool
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		want = outboxIDs(t, dbA)
		completed := 0
		var oa int
		st, _ := store.Open(t.Context(), dbA, store.Options{ReadOnly: true})
		st.DB().QueryRowContext(t.Context(), "SELECT count(*) FROM orders WHERE merchant_order_id LIKE 'after-%' AND status = 'completed'").Scan(&oa)
		st.Close(context.Background())
		completed = oa
		if completed == 20 && len(streamEvents(t, js)) >= len(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 20 new orders completed, %d of %d events on the stream", completed, len(streamEvents(t, js)), len(want))
		}
	}
	waitConverged(t, a, b)
	// The relay may still be publishing what the last entries queued.
	want = outboxIDs(t, dbA)
	for deadline := time.Now().Add(30 * time.Second); len(streamEvents(t, js)) < len(want) && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
	}
	if cb := tableCounts(t, filepath.Join(dirB, "orderd.db")); cb["orders"] != orders+20 {
		t.Errorf("the empty-disk instance has %d orders, want %d", cb["orders"], orders+20)
	}

	// Every event of the database is on the stream exactly once: none
	// the single node published went out again.
	events := streamEvents(t, js)
	var twice, stray, missing []string
	for id, n := range events {
		if n != 1 {
			twice = append(twice, id)
		}
		if !want[id] {
			stray = append(stray, id)
		}
	}
	for id := range want {
		if events[id] == 0 {
			missing = append(missing, id)
		}
	}
	if len(twice)+len(stray)+len(missing) > 0 {
		few := func(ids []string) []string { return ids[:min(3, len(ids))] }
		t.Errorf("of %d events: %d on the stream more than once (%q…), %d in no outbox (%q…), %d never published (%q…)",
			len(want), len(twice), few(twice), len(stray), few(stray), len(missing), few(missing))
	}
	if len(published) == 0 || len(published) >= len(events) {
		t.Errorf("%d events published by the single node, %d in all: the test proves nothing", len(published), len(events))
	}

	t.Run("a foreign backup is refused", func(t *testing.T) {
		foreign := filepath.Join(t.TempDir(), "foreign.db")
		buildSingleNode(t, foreign, 0, 10)
		st, err := store.Open(t.Context(), foreign, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		other := "11111111-2222-4333-8444-555555555555"
		if _, err := st.StartLog(t.Context(), other); err != nil {
			t.Fatal(err)
		}
		st.Close(context.Background())

		// orderd restore, on a stopped instance's database.
		b.stop(t)
		res := runOrderd(t, nil, nil, "restore", "-config", cfgB, "-i", foreign)
		if res.code != 2 || !strings.Contains(res.stderr, "-i "+foreign) || !strings.Contains(res.stderr, other) || !strings.Contains(res.stderr, logID) {
			t.Errorf("restore: exit %d, stderr %s; want 2 naming -i and both ids", res.code, res.stderr)
		}
		// orderd run on a database of another log.
		dirC := t.TempDir()
		if err := os.Rename(foreign, filepath.Join(dirC, "orderd.db")); err != nil {
			t.Fatal(err)
		}
		cfgC := daemonConfig(t, dirC, fake, natsYAML(ec.ClientURL(), ""), clusterYAML("c", ""))
		res = runOrderd(t, nil, nil, "run", "-config", cfgC)
		if res.code != 1 || !strings.Contains(res.stderr, "store.path") || !strings.Contains(res.stderr, other) || !strings.Contains(res.stderr, logID) {
			t.Errorf("run: exit %d, stderr %s; want 1 naming store.path and both ids", res.code, res.stderr)
		}
	})

	t.Run("a differing setting is refused and changes nothing", func(t *testing.T) {
		s, err := js.Stream(t.Context(), "ORDERD")
		if err != nil {
			t.Fatal(err)
		}
		infoBefore, _ := s.Info(t.Context())
		for _, tc := range []struct{ name, nats, cluster, key string }{
			{"cluster replicas", "", "  replicas: 1\n", "cluster.replicas"},
			{"event replicas", "  replicas: 1\n", "", "nats.replicas"},
			{"event max bytes", "  max_bytes: 20KB\n", "", "nats.max_bytes"},
			{"lease ttl", "", "", "cluster.lease_ttl"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				dir := t.TempDir()
				nv := natsYAML(ec.ClientURL(), "")
				if tc.nats != "" {
					nv = "  url: " + ec.ClientURL() + "\n  duplicate_window: 1s\n" + tc.nats
					if !strings.Contains(tc.nats, "replicas") {
						nv += "  replicas: 3\n"
					}
				}
				cl := clusterYAML("d", tc.cluster)
				if tc.key == "cluster.lease_ttl" {
					cl = strings.Replace(cl, "lease_ttl: 2s", "lease_ttl: 3s", 1)
				}
				cfg := daemonConfig(t, dir, fake, nv, cl)
				res := runOrderd(t, nil, nil, "run", "-config", cfg)
				if res.code != 2 || !strings.Contains(res.stderr, tc.key) {
					t.Errorf("exit %d, stderr %s; want 2 naming %s", res.code, res.stderr, tc.key)
				}
			})
		}
		infoAfter, _ := s.Info(t.Context())
		if infoAfter.Config.Replicas != 3 || infoAfter.Config.Replicas != infoBefore.Config.Replicas ||
			infoAfter.Config.MaxBytes != infoBefore.Config.MaxBytes || infoAfter.State.Msgs != infoBefore.State.Msgs {
			t.Errorf("the events stream changed: replicas %d→%d, max bytes %d→%d, messages %d→%d",
				infoBefore.Config.Replicas, infoAfter.Config.Replicas, infoBefore.Config.MaxBytes, infoAfter.Config.MaxBytes,
				infoBefore.State.Msgs, infoAfter.State.Msgs)
		}
		ls, err := js.Stream(t.Context(), "ORDERD_LOG")
		if err != nil {
			t.Fatal(err)
		}
		if li, _ := ls.Info(t.Context()); li.Config.Replicas != 3 {
			t.Errorf("the log has %d replicas, want 3", li.Config.Replicas)
		}
	})
}

// clusterLog reads GET /v1/cluster's "log".
func clusterLog(t testing.TB, admin string) string {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/v1/cluster")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct{ Log string }
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st.Log
}

// sendOrders has the fake provider create and complete orders
// [from, from+n) with their webhooks to r.
func sendOrders(t *testing.T, fake *providertest.Server, r *replicaDaemon, prefix string, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		mid := fmt.Sprintf("%s-%d", prefix, i)
		if _, err := fake.CreateOrder(providertest.NewOrder{MerchantOrderID: mid, Amount: "10.00", Currency: "brl",
			WebhookURL: "http://" + r.addrs.Webhooks + "/webhooks/orders"}); err != nil {
			t.Fatal(err)
		}
		if err := fake.Complete(mid); err != nil {
			t.Fatal(err)
		}
	}
}

// waitOrders waits until the database in dir holds n completed orders.
func waitOrders(t *testing.T, dir string, n int) {
	t.Helper()
	var got int
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		st, err := store.Open(t.Context(), filepath.Join(dir, "orderd.db"), store.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		st.DB().QueryRowContext(t.Context(), "SELECT count(*) FROM orders WHERE status = 'completed'").Scan(&got)
		st.Close(context.Background())
		if got == n {
			return
		}
	}
	t.Fatalf("%s: %d completed orders, want %d", dir, got, n)
}

// TestClusterSeed_LostLog: the log (its stream, lease and snapshots) is
// lost while the instances keep their databases. The most advanced
// instance's database seeds a new log and carries on; an instance whose
// database follows the lost log is refused until it is rebuilt from the
// new log's snapshot, and then converges. The seed refuses a log in use,
// a database a daemon holds and a configuration without the cluster.
func TestClusterSeed_LostLog(t *testing.T) {
	ec, fake := natsAndFake(t)
	js := jetStreamAt(t, ec.ClientURL())

	dirA, dirB := t.TempDir(), t.TempDir()
	// A lease of 20s: on a loaded machine (go test -race beside other
	// packages) a 2s lease can lapse under a paused a.
	cfgA := daemonConfig(t, dirA, fake, natsYAML(ec.ClientURL(), ""), clusterYAML("a", "  lease_ttl: 20s\n"))
	cfgB := daemonConfig(t, dirB, fake, natsYAML(ec.ClientURL(), ""), clusterYAML("b", "  lease_ttl: 20s\n"))
	// a leads throughout: b, which stops first, never held the lease, so
	// no takeover can publish an event again (the short duplicate window
	// would keep such a repeat), and a repeat on the stream can only come
	// from the seed.
	a := startReplicaIn(t, dirA, cfgA, "a")
	waitLeading(t, a)
	b := startReplicaIn(t, dirB, cfgB, "b")
	oldLog := clusterLog(t, a.addrs.Admin)
	if oldLog == "" || clusterLog(t, b.addrs.Admin) != oldLog {
		t.Fatalf("a fresh log's id: a %q, b %q", oldLog, clusterLog(t, b.addrs.Admin))
	}
	sendOrders(t, fake, a, "first", 0, 10)
	waitOrders(t, dirA, 10)
	waitConverged(t, a, b)

	t.Run("refusals", func(t *testing.T) {
		res := runOrderd(t, nil, nil, "cluster", "seed", "-config", cfgA)
		if res.code != 2 || !strings.Contains(res.stderr, "store.path") {
			t.Errorf("seed of a database in use: exit %d, stderr %s; want 2 naming store.path", res.code, res.stderr)
		}
		single := daemonConfig(t, t.TempDir(), fake, natsYAML(ec.ClientURL(), ""), quietJobs)
		res = runOrderd(t, nil, nil, "cluster", "seed", "-config", single)
		if res.code != 2 || !strings.Contains(res.stderr, "cluster.enabled") {
			t.Errorf("seed without the cluster: exit %d, stderr %s; want 2 naming cluster.enabled", res.code, res.stderr)
		}
	})

	// b stops first; a goes on alone and is the most advanced.
	b.stop(t)
	sendOrders(t, fake, a, "alone", 0, 5)
	waitOrders(t, dirA, 15)
	a.stop(t)

	t.Run("a log with entries is refused", func(t *testing.T) {
		res := runOrderd(t, nil, nil, "cluster", "seed", "-config", cfgA)
		if res.code != 2 || !strings.Contains(res.stderr, "cluster.log_stream") {
			t.Errorf("exit %d, stderr %s; want 2 naming cluster.log_stream", res.code, res.stderr)
		}
	})

	// The log is lost: its stream, its lease and its snapshots.
	for _, del := range []func() error{
		func() error { return js.DeleteStream(t.Context(), "ORDERD_LOG") },
		func() error { return js.DeleteKeyValue(t.Context(), "ORDERD_LEASE") },
		func() error { return js.DeleteObjectStore(t.Context(), "ORDERD_SNAPSHOTS") },
	} {
		if err := del(); err != nil {
			t.Fatal(err)
		}
	}
	res := runOrderd(t, nil, nil, "cluster", "seed", "-config", cfgA)
	m := seededRE.FindStringSubmatch(res.stdout)
	if res.code != 0 || m == nil || m[3] != "15" {
		t.Fatalf("seed: exit %d, stdout %q, stderr %s; want 15 orders", res.code, res.stdout, res.stderr)
	}
	newLog := m[1]
	if newLog == oldLog {
		t.Fatalf("the new log has the lost log's id %s", oldLog)
	}
	a = startReplicaIn(t, dirA, cfgA, "a")
	waitLeading(t, a)
	if got := clusterLog(t, a.addrs.Admin); got != newLog {
		t.Errorf("a follows %q, want %q", got, newLog)
	}

	// b's database follows the lost log: refused, naming both ids.
	res = runOrderd(t, nil, nil, "run", "-config", cfgB)
	if res.code != 1 || !strings.Contains(res.stderr, "store.path") || !strings.Contains(res.stderr, oldLog) || !strings.Contains(res.stderr, newLog) {
		t.Fatalf("b on the lost log's database: exit %d, stderr %s; want 1 naming store.path and both ids", res.code, res.stderr)
	}
	// Rebuilt: its database moved away, b restores the new log's snapshot.
	for _, suffix := range dbSuffixes {
		os.Rename(filepath.Join(dirB, "orderd.db"+suffix), filepath.Join(dirB, "old.db"+suffix))
	}
	b = startReplicaIn(t, dirB, cfgB, "b")
	sendOrders(t, fake, b, "after", 0, 3)
	waitOrders(t, dirA, 18)
	waitConverged(t, a, b)
	if got := clusterLog(t, b.addrs.Admin); got != newLog {
		t.Errorf("b follows %q, want %q", got, newLog)
	}
	// Every event went out once, those before the loss too.
	want := outboxIDs(t, filepath.Join(dirA, "orderd.db"))
	var events map[string]int
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if events = streamEvents(t, js); len(events) >= len(want) {
			break
		}
	}
	for id := range want {
		if events[id] != 1 {
			t.Errorf("event %s is on the stream %d times, want 1", id, events[id])
		}
	}
}

// TestClusterCommand_Usage: orderd cluster needs a known subcommand and
// no stray arguments; -h prints the seed's usage.
func TestClusterCommand_Usage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no subcommand", []string{"cluster"}, 2, "a subcommand is required: seed"},
		{"unknown subcommand", []string{"cluster", "sow"}, 2, `unknown subcommand "sow"`},
		{"stray argument", []string{"cluster", "seed", "now"}, 2, `unexpected argument "now"`},
		{"help", []string{"cluster", "seed", "-h"}, 0, "Usage: orderd cluster seed [-config FILE]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runOrderd(t, nil, nil, tc.args...)
			if r.code != tc.code || !strings.Contains(r.stdout+r.stderr, tc.want) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want %d and %q", r.code, r.stdout, r.stderr, tc.code, tc.want)
			}
		})
	}
}

// waitLeading waits until r holds the lease.
func waitLeading(t testing.TB, r *replicaDaemon) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !clusterStatus(t, r.addrs.Admin).Leading; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s does not lead within 20s", r.name)
		}
	}
}

// TestClusterSeed_Unfinished: a seed that did not finish (the log marked
// as being seeded, its id and base not yet given, as a seed killed midway
// leaves it) is refused by orderd run on the seeded database and on an
// empty disk, each exiting 1 with a message naming orderd cluster seed;
// the seed run again on the same database finishes it, and both instances
// then start and agree.
func TestClusterSeed_Unfinished(t *testing.T) {
	ec, fake := natsAndFake(t)
	js := jetStreamAt(t, ec.ClientURL())
	dirA, dirB := t.TempDir(), t.TempDir()
	dbA := filepath.Join(dirA, "orderd.db")
	buildSingleNode(t, dbA, 0, 40)
	cfgA := daemonConfig(t, dirA, fake, natsYAML(ec.ClientURL(), ""), clusterYAML("a", ""))
	cfgB := daemonConfig(t, dirB, fake, natsYAML(ec.ClientURL(), ""), clusterYAML("b", ""))
	if res := runOrderd(t, nil, nil, "cluster", "seed", "-config", cfgA); res.code != 0 {
		t.Fatalf("seed: exit %d: %s", res.code, res.stderr)
	}
	// The state a seed killed after its upload leaves: the log marked as
	// being seeded, no id, no base.
	s, err := js.Stream(t.Context(), "ORDERD_LOG")
	if err != nil {
		t.Fatal(err)
	}
	sc := s.CachedInfo().Config
	md := map[string]string{}
	for k, v := range sc.Metadata {
		md[k] = v
	}
	md["orderd_log_seeding"] = md["orderd_log_id"]
	delete(md, "orderd_log_id")
	delete(md, "orderd_log_base")
	sc.Metadata = md
	if _, err := js.UpdateStream(t.Context(), sc); err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []string{cfgA, cfgB} {
		res := runOrderd(t, nil, nil, "run", "-config", cfg)
		if res.code != 1 || !strings.Contains(res.stderr, "orderd cluster seed") || !strings.Contains(res.stderr, "ORDERD_LOG") {
			t.Errorf("run on an unfinished seed: exit %d, stderr %s; want 1 naming ORDERD_LOG and orderd cluster seed", res.code, res.stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dirB, "orderd.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused empty disk has a database: %v", err)
	}
	res := runOrderd(t, nil, nil, "cluster", "seed", "-config", cfgA)
	if res.code != 0 || !seededRE.MatchString(res.stdout) {
		t.Fatalf("the seed run again: exit %d, stdout %q, stderr %s", res.code, res.stdout, res.stderr)
	}
	a := startReplicaIn(t, dirA, cfgA, "a")
	b := startReplicaIn(t, dirB, cfgB, "b")
	waitConverged(t, a, b)
	if n := tableCounts(t, filepath.Join(dirB, "orderd.db"))["orders"]; n != 40 {
		t.Fatalf("the empty disk holds %d orders after the seed, want 40", n)
	}
}

package reconcile_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"orderd/api"
	"orderd/provider"
	"orderd/provider/providertest"
	"orderd/publish"
	"orderd/reconcile"
	"orderd/store"
	"orderd/test/support/eventschema"
)

// TestEvents_everyTypeMatchesTheAsyncAPIDocument produces every event type
// orderd publishes through the code that makes it in production (the write
// path, the gateway's attempts settled by the doubt job, the quarantine,
// the relay's set-aside, each reconcile job), publishes them with the real
// relay to a real NATS server, and checks every message read back from the
// stream against api/asyncapi.yaml: its envelope against the message its
// type names, its data against the schema its dataschema points at, with
// the provider's order shape closed (eventschema.Strict), so a field the
// fake or orderd starts to send fails here until the document names it.
// The document must have a message for every type produced, and every
// message it has must be produced here.
func TestEvents_everyTypeMatchesTheAsyncAPIDocument(t *testing.T) {
	e := balancesEnv(t, reconcile.Config{UnresolvedAfter: time.Hour})
	ctx := t.Context()

	// Balances: a first snapshot, so that a later run compares.
	e.run(e.rec.RunBalances)

	// order.processing (the gateway's answer), order.completed (a
	// webhook), order.rejected, order.updated (a refund in a completed
	// order), order.new (a webhook of an order in status new).
	// The creation's answer, as the gateway applies it (with auth).
	_, created, err := e.client.CreatePayment(ctx, provider.PaymentRequest{MerchantOrderID: "paid",
		Invoice: provider.MustMoney("200.00", "brl")})
	if err != nil {
		t.Fatal(err)
	}
	e.apply(created, store.SourceGateway)
	if err := e.fake.Complete("paid"); err != nil {
		t.Fatal(err)
	}
	e.learn("paid", store.SourceWebhook)
	refund, _, err := e.client.CreateRefund(ctx, provider.RefundRequest{Amount: dec("50.00"), MerchantOrderID: "paid"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.fake.CompleteRefund("paid", refund.RefundTransaction.ID, true); err != nil {
		t.Fatal(err)
	}
	e.learn("paid", store.SourcePoll)
	e.createAtFake("refused", "15.00", provider.TypePayin)
	if err := e.fake.Reject("refused", "declined by the issuer"); err != nil {
		t.Fatal(err)
	}
	e.learn("refused", store.SourceWebhook)
	e.createAtFake("fresh", "5.00", provider.TypePayin)
	e.apply(withStatus(t, e, "fresh", provider.StatusNew), store.SourceWebhook)

	// reconcile.amount_changed: a final order's money changes.
	e.createAtFake("moved", "20.00", provider.TypePayin)
	if err := e.fake.Complete("moved"); err != nil {
		t.Fatal(err)
	}
	e.learn("moved", store.SourceWebhook)
	raw, _ := e.fake.OrderJSON("moved")
	var moved provider.Order
	if err := json.Unmarshal(raw, &moved); err != nil {
		t.Fatal(err)
	}
	m := provider.MustMoney("19.00", "brl")
	moved.MerchantTargetWallet = &m
	changed, err := json.Marshal(moved)
	if err != nil {
		t.Fatal(err)
	}
	e.apply(changed, store.SourcePoll)

	// reconcile.mismatch: a webhook says completed, get-status processing.
	e.createAtFake("disputed", "40.00", provider.TypePayin)
	e.apply(withStatus(t, e, "disputed", provider.StatusCompleted), store.SourceWebhook)
	if err := e.st.MarkForPoll(ctx, "disputed", "check"); err != nil {
		t.Fatal(err)
	}
	e.run(e.rec.RunStale)

	// reconcile.quarantined_webhook: a signed body that did not parse.
	if err := e.st.Quarantine(ctx, store.QuarantinedWebhook{Raw: []byte(`{"id":"q-1","merchantOrderId":"garbled","status":7}`),
		Reason: "status: not a string", OrderID: "q-1", MerchantOrderID: "garbled", ReceivedAt: e.clock.Now()}); err != nil {
		t.Fatal(err)
	}

	// order.not_created, and reconcile.identity_conflict: two creations in
	// doubt, one the provider never made, one it made under an order id
	// that contradicts the one orderd holds for its merchantOrderId.
	e.inDoubt("absent", "45.00")
	e.createAtFake("contested", "30.00", provider.TypePayin)
	e.learnUnder("contested", "00000000-0000-4000-8000-000000000003", store.SourcePoll)
	e.inDoubt("contested", "30.00")
	e.clock.Advance(doubtMinAge + time.Second)
	e.run(e.rec.RunDoubt)

	// reconcile.unresolved_creation: get-status keeps failing.
	e.inDoubt("murky", "12.00")
	e.clock.Advance(doubtMinAge + time.Second)
	fault := providertest.Fault{Endpoint: providertest.PathGetStatus, Kind: providertest.ErrorAnswer,
		Code: provider.CodeRejectedDueToTechnicalIssue, Count: 100}
	if err := e.fake.InjectFault(fault); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Hour)
	e.run(e.rec.RunDoubt)
	e.run(e.rec.RunDoubt)
	e.fake.ClearFaults()

	// reconcile.watch_not_found and reconcile.stuck_order: a watched order
	// the provider never knew, and an order that stays processing.
	if err := e.st.MarkForPoll(ctx, "never-created", "quarantined webhook"); err != nil {
		t.Fatal(err)
	}
	e.createAtFake("stuck", "10.00", provider.TypePayin)
	e.learn("stuck", store.SourceGateway)
	e.run(e.rec.RunStale)
	e.clock.Advance(giveUpAfter + staleAfter + time.Second)
	e.run(e.rec.RunStale)

	// reconcile.balance_drift: the provider takes money no order explains,
	// still unexplained at the second check (reconcile.drift_grace).
	if err := e.fake.AdjustBalance("brl", "-12.34"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		e.clock.Advance(15 * time.Minute)
		e.run(e.rec.RunBalances)
	}
	// A person acknowledges it: the action's event carries the trail.
	drift := e.findings(store.FindingBalanceDrift, "open")
	if len(drift) != 1 {
		t.Fatalf("balance_drift findings = %+v", drift)
	}
	if _, err := e.st.ActOnFinding(t.Context(), store.FindingActionCmd{ID: drift[0].ID, Action: store.ActionAcknowledge,
		By: "ana", Note: "checking the statement"}); err != nil {
		t.Fatal(err)
	}

	// reconcile.event_not_published: the relay sets an event aside (an
	// order's of its own, so that every other event goes out).
	e.createAtFake("too-large", "1.00", provider.TypePayin)
	e.learn("too-large", store.SourcePoll)
	big := e.eventsOf("order.processing", "too-large")
	if len(big) != 1 {
		t.Fatalf("order.processing events of too-large = %d, want 1", len(big))
	}
	if err := e.st.SetAsideEvent(ctx, store.SetAside{Seq: big[0].Seq, ID: big[0].ID, Type: big[0].Type, Subject: big[0].Subject,
		EventSubject: big[0].EventSubject, Bytes: 5 << 20, Limit: 4 << 20, Reason: "larger than the server's max_payload"}); err != nil {
		t.Fatal(err)
	}

	// reconcile.replica_divergence: replicated instances' digests differ
	// at a checkpoint (the cluster package opens it with this detail).
	detail, err := json.Marshal(store.ReplicaDivergence{Seq: 200000, Action: "restart the odd one on an empty disk",
		Instances: []store.ReplicaDigest{{Node: "a", Digest: strings.Repeat("a", 64)}, {Node: "b", Digest: strings.Repeat("b", 64)}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Exec(ctx, &store.OpenFindingCmd{FindingKind: store.FindingReplicaDivergence, Key: "200000", Detail: detail}); err != nil {
		t.Fatal(err)
	}

	// Publish everything with the real relay, then read the stream back.
	nc, js := startEventsNATS(t)
	relay, err := publish.NewRelay(publish.RelayConfig{Stream: &publish.StreamConfig{}}, e.st, js)
	if err != nil {
		t.Fatal(err)
	}
	if err := relay.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	msgs := readStream(t, nc, js)

	v, err := eventschema.New(api.AsyncAPI(), eventschema.Strict)
	if err != nil {
		t.Fatalf("asyncapi document: %v", err)
	}
	seen := map[string]int{}
	for _, msg := range msgs {
		var env struct {
			ID   string `json:"id"`
			Type string `json:"type"`
		}
		if err := json.Unmarshal(msg.Data, &env); err != nil {
			t.Fatalf("message on %s is not JSON: %v", msg.Subject, err)
		}
		if got := msg.Header.Get("Nats-Msg-Id"); got != env.ID {
			t.Errorf("%s: Nats-Msg-Id %q, event id %q", env.Type, got, env.ID)
		}
		if _, err := v.Check(msg.Data); err != nil {
			t.Errorf("message on %s: %v\n%s", msg.Subject, err, msg.Data)
		}
		seen[env.Type]++
	}
	for _, typ := range v.Types() {
		if seen[typ] == 0 {
			t.Errorf("no test event of type %s, which the document describes", typ)
		}
	}
	types := make([]string, 0, len(seen))
	for typ, n := range seen {
		types = append(types, typ+"="+strconv.Itoa(n))
	}
	slices.Sort(types)
	t.Logf("published %d events: %s", len(msgs), strings.Join(types, " "))
}

// startEventsNATS starts an embedded NATS server with JetStream on a free
// loopback port and connects to it.
func startEventsNATS(t *testing.T) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	srv, err := publish.StartEmbedded(publish.EmbeddedConfig{Listen: "127.0.0.1:0", StoreDir: t.TempDir()})
	if err != nil {
		t.Fatalf("start nats: %v", err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := publish.NewJetStream(nc, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// readStream reads every message of the ORDERD stream, in order.
func readStream(t *testing.T, _ *nats.Conn, js jetstream.JetStream) []*nats.Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, "ORDERD")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []*nats.Msg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		raw, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatalf("get message %d: %v", seq, err)
		}
		out = append(out, &nats.Msg{Subject: raw.Subject, Header: raw.Header, Data: raw.Data})
	}
	return out
}

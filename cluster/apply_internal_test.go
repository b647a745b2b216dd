package cluster

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"orderd/store"
)

// TestNode_appliesOwnEntriesAtAck: an instance's own entry, handed to the
// applier at its ack, is applied as soon as it is the next entry (its
// caller answered without waiting for the log's consumer), passed over
// while entries before it are missing, and not applied again when the
// consumer brings it.
func TestNode_appliesOwnEntriesAtAck(t *testing.T) {
	ctx := t.Context()
	n, st, _, _ := testNode(t)
	one, two := write("one"), write("two")
	n.appendGroup(ctx, []*call{one})
	n.appendGroup(ctx, []*call{two})
	own := make([]logMsg, 2)
	for i := range own {
		select {
		case own[i] = <-n.acked:
		case <-time.After(5 * time.Second):
			t.Fatal("an appended entry was not handed to the applier")
		}
		if !own[i].own || own[i].seq != uint64(i+1) {
			t.Fatalf("handed over %+v, want own entry %d", own[i], i+1)
		}
	}
	applied := func() uint64 {
		t.Helper()
		seq, err := st.AppliedSeq(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return seq
	}

	// Entry 2 alone does not follow: passed over, nothing applied.
	if err := n.applyMsgs(ctx, []logMsg{own[1]}); err != nil {
		t.Fatalf("own entry ahead of the applier: %v", err)
	}
	if seq := applied(); seq != 0 {
		t.Fatalf("applied seq %d after an own entry that did not follow, want 0", seq)
	}
	// Both, in any order: applied, their callers answered.
	if err := n.applyMsgs(ctx, []logMsg{own[1], own[0]}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*call{one, two} {
		select {
		case <-c.done:
		default:
			t.Fatal("a caller of an applied own entry was not answered")
		}
		if c.err != nil || len(c.res) != 1 || c.res[0].Err != nil {
			t.Fatalf("own entry's result: %v %+v", c.err, c.res)
		}
	}
	if seq := applied(); seq != 2 {
		t.Fatalf("applied seq %d, want 2", seq)
	}

	// The consumer brings both again: passed over.
	cons, err := n.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var again []logMsg
	for range 2 {
		jmsg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		m, err := consumerMsg(jmsg)
		if err != nil {
			t.Fatal(err)
		}
		again = append(again, m)
	}
	if err := n.applyMsgs(ctx, again); err != nil {
		t.Fatal(err)
	}
	if seq := applied(); seq != 2 {
		t.Fatalf("applied seq %d after the consumer's copies, want 2", seq)
	}
	var findings int
	if err := st.DB().QueryRowContext(ctx, `SELECT count(*) FROM findings WHERE kind = 'test'`).Scan(&findings); err != nil {
		t.Fatal(err)
	}
	if findings != 2 {
		t.Fatalf("%d findings, want 2 (each entry applied once)", findings)
	}

	// A consumer's entry that does not follow is a gap, never passed over.
	gap := again[1]
	gap.seq = 4
	if err := n.applyMsgs(ctx, []logMsg{gap}); !errors.Is(err, errFatal) || !errors.Is(err, store.ErrLogGap) {
		t.Fatalf("a gap in the consumer's entries: err = %v, want fatal ErrLogGap", err)
	}
}

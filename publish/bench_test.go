package publish_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"orderd/provider"
	"orderd/publish"
	"orderd/store"
)

const (
	// benchEvents is how many events one benchmark iteration moves.
	benchEvents = 20000
	// benchRounds splits an iteration into alternating relay and raw
	// rounds, so that both see the same machine load.
	benchRounds = 4
	// benchWindow and benchBatch are the relay's default window and batch
	// size, used by all.
	benchWindow = 256
	benchBatch  = 256
)

// fillOutbox applies n new orders through the store from several
// goroutines (so they share commits) and returns when all are committed.
func fillOutbox(b *testing.B, st *store.Store, tag string, n int) {
	b.Helper()
	const workers = 32
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				o := newTestOrder(tag, i)
				raw := o.raw("processing", false)
				ord, err := provider.DecodeOrder(raw)
				if err != nil {
					errs <- err
					return
				}
				if _, err := st.Apply(context.Background(), store.Observation{
					Source: store.SourcePoll, Order: ord, Raw: raw, ObservedAt: time.Now(),
				}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatalf("fill outbox: %v", err)
	}
}

// rawMsgs encodes n events of the shape and size the relay publishes, on
// the given prefix.
func rawMsgs(b *testing.B, prefix, tag string, n int) ([]*nats.Msg, []string) {
	b.Helper()
	msgs := make([]*nats.Msg, n)
	ids := make([]string, n)
	for j := range msgs {
		o := newTestOrder(tag, j)
		sum := sha256.Sum256([]byte(o.id))
		ids[j] = hex.EncodeToString(sum[:])
		subject, payload, err := publish.EncodeEvent(store.OutboxEvent{
			Seq: int64(j + 1), ID: ids[j], Type: "order.processing", Subject: "orders.payin.processing",
			EventSubject: o.id, Time: time.Now(), MerchantOrderID: o.mid, LearnedVia: store.SourcePoll,
			Data: o.raw("processing", false),
		}, prefix, "orderd", publish.DefaultSchemaURL)
		if err != nil {
			b.Fatal(err)
		}
		msgs[j] = &nats.Msg{Subject: subject, Data: payload}
	}
	return msgs, ids
}

// rawPublish publishes msgs asynchronously with Nats-Msg-Id, at most a
// window in flight, and waits for every ack: the fastest way through the
// client, without a database.
func rawPublish(b *testing.B, js jetstream.JetStream, msgs []*nats.Msg, ids []string) time.Duration {
	b.Helper()
	start := time.Now()
	futures := make([]jetstream.PubAckFuture, 0, benchWindow)
	waitFirst := func(n int) {
		for _, f := range futures[:n] {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				b.Fatalf("raw publish: %v", err)
			}
		}
		futures = append(futures[:0], futures[n:]...)
	}
	for j, m := range msgs {
		if len(futures) == benchWindow {
			waitFirst(1)
		}
		f, err := js.PublishMsgAsync(m, jetstream.WithMsgID(ids[j]))
		if err != nil {
			b.Fatalf("raw publish: %v", err)
		}
		futures = append(futures, f)
	}
	waitFirst(len(futures))
	return time.Since(start)
}

// rawBatchPublish publishes msgs as atomic batches of benchBatch messages,
// one batch at a time, the way the relay sends a backlog: all but the last
// message of a batch without reply, the commit awaited.
func rawBatchPublish(b *testing.B, js jetstream.JetStream, msgs []*nats.Msg, ids []string) time.Duration {
	b.Helper()
	nc := js.Conn()
	start := time.Now()
	for lo := 0; lo < len(msgs); lo += benchBatch {
		part := msgs[lo:min(lo+benchBatch, len(msgs))]
		batchID := fmt.Sprintf("raw-%d-%d", start.UnixNano(), lo)
		for j, m := range part {
			bm := &nats.Msg{Subject: m.Subject, Data: m.Data, Header: nats.Header{
				jetstream.MsgIDHeader: {ids[lo+j]},
				"Nats-Batch-Id":       {batchID},
				"Nats-Batch-Sequence": {strconv.Itoa(j + 1)},
			}}
			if j < len(part)-1 {
				if err := nc.PublishMsg(bm); err != nil {
					b.Fatalf("raw batch publish: %v", err)
				}
				continue
			}
			bm.Header.Set("Nats-Batch-Commit", "1")
			if _, err := js.PublishMsg(context.Background(), bm); err != nil {
				b.Fatalf("raw batch commit: %v", err)
			}
		}
	}
	return time.Since(start)
}

// benchJetStream starts an embedded server (SyncAlways, as orderd runs it)
// with the ORDERD stream and a RAW stream on prefix "raw".
func benchJetStream(b *testing.B) jetstream.JetStream {
	b.Helper()
	e := startNATS(b, b.TempDir(), "127.0.0.1:0")
	nc, err := publish.Connect(context.Background(), publish.ConnConfig{URL: e.ClientURL()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	js, err := publish.NewJetStream(nc, 30*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	for _, sc := range []publish.StreamConfig{{}, {Name: "RAW", Prefix: "raw"}} {
		if _, err := publish.EnsureStream(context.Background(), js, sc); err != nil {
			b.Fatal(err)
		}
	}
	return js
}

// BenchmarkRelay_Throughput drains outboxes pre-filled with 20,000 events
// per iteration into an embedded JetStream with SyncAlways (each write
// fsynced before its ack): read from SQLite, encode, publish (in atomic
// batches) with Nats-Msg-Id, await acks, mark published. In alternating
// rounds it sends as many events of the same size straight to the same
// server, no database, through the two raw loops of
// BenchmarkJetStream_RawPublish: one message at a time with a window of
// async acks (raw-events/s), and atomic batches (raw-batch-events/s). It
// reports the relay's rate as a percentage of each (target ≥ 70 % of raw).
func BenchmarkRelay_Throughput(b *testing.B) {
	js := benchJetStream(b)
	st, _ := openStore(b, store.Options{})
	r := newRelay(b, publish.RelayConfig{BatchSize: benchBatch, Window: benchWindow, PublishTimeout: 30 * time.Second}, st, js)

	per := benchEvents / benchRounds
	var relayTime, rawTime, batchTime time.Duration
	b.ResetTimer()
	for i := range b.N {
		for round := range benchRounds {
			b.StopTimer()
			tag := fmt.Sprintf("i%dr%d", i, round)
			fillOutbox(b, st, tag, per)
			msgs, ids := rawMsgs(b, "raw", tag, per)
			bmsgs, bids := rawMsgs(b, "raw", tag+"b", per)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			b.StartTimer()
			start := time.Now()
			err := r.Flush(ctx)
			relayTime += time.Since(start)
			b.StopTimer()
			cancel()
			if err != nil {
				b.Fatal(err)
			}
			rawTime += rawPublish(b, js, msgs, ids)
			batchTime += rawBatchPublish(b, js, bmsgs, bids)
		}
	}
	b.StopTimer()
	if n := backlog(b, st); n != 0 {
		b.Fatalf("backlog %d after the last flush", n)
	}
	want := uint64(b.N * benchRounds * per)
	if got := streamCount(b, js, "ORDERD"); got != want {
		b.Fatalf("ORDERD holds %d events, want %d", got, want)
	}
	if got := streamCount(b, js, "RAW"); got != 2*want {
		b.Fatalf("RAW holds %d events, want %d", got, 2*want)
	}
	relayRate := float64(want) / relayTime.Seconds()
	rawRate := float64(want) / rawTime.Seconds()
	batchRate := float64(want) / batchTime.Seconds()
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(relayRate, "events/s")
	b.ReportMetric(rawRate, "raw-events/s")
	b.ReportMetric(batchRate, "raw-batch-events/s")
	b.ReportMetric(100*relayRate/rawRate, "pct-of-raw")
	b.ReportMetric(100*relayRate/batchRate, "pct-of-raw-batch")
}

// BenchmarkJetStream_RawPublish is the relay's ceiling on its own: 20,000
// already encoded events per iteration, of the relay's shape and size, sent
// to a server with the same settings with Nats-Msg-Id, no database: "async"
// publishes one message at a time with the relay's window of outstanding
// acks; "atomic-batch" sends atomic batches of the relay's batch size.
func BenchmarkJetStream_RawPublish(b *testing.B) {
	for _, mode := range []struct {
		name    string
		publish func(*testing.B, jetstream.JetStream, []*nats.Msg, []string) time.Duration
	}{
		{"async", rawPublish},
		{"atomic-batch", rawBatchPublish},
	} {
		b.Run(mode.name, func(b *testing.B) {
			js := benchJetStream(b)
			var total time.Duration
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				msgs, ids := rawMsgs(b, "raw", fmt.Sprintf("i%d", i), benchEvents)
				b.StartTimer()
				total += mode.publish(b, js, msgs, ids)
			}
			b.StopTimer()
			if got := streamCount(b, js, "RAW"); got != uint64(b.N*benchEvents) {
				b.Fatalf("RAW holds %d events, want %d", got, b.N*benchEvents)
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(float64(b.N*benchEvents)/total.Seconds(), "events/s")
		})
	}
}

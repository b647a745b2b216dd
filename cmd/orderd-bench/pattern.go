package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// patternRound measures what replicated mode's use of NATS costs the NATS
// servers alone, without orderd's own work: the floor of the NATS side of
// a webhook. It replays the traffic two instances and their relay make
// per webhook, with the sizes measured in replicated mode's runs, on
// scratch streams with the log's and the events stream's settings:
//
//   - two appenders (the instances), each on its own connection, each
//     with one log entry in flight, an entry carrying -pattern-group
//     webhooks of -pattern-op-bytes each, with a message id;
//   - an ordered consumer of the log on each connection, reading every
//     entry (every instance applies every entry);
//   - a relay on the first connection publishing one event of -raw-size
//     bytes per appended webhook, in atomic batches of -pattern-batch
//     with a message id each, one batch in flight.
//
// A "webhook" is one op in an acked entry whose event is acknowledged
// too; the NATS servers' CPU is read from before the first append until
// both consumers have read every entry and the last event is acked. The
// pattern is the favourable one: full groups and full batches every time,
// and none of the relay's marks, the lease or the digests.
func (b *bench) patternRound(ctx context.Context, round int) (roundResult, error) {
	rr := roundResult{target: "pattern", round: round, cpuPer1k: -1, peakRSS: -1, drained: -1, unpublish: -1}
	o := b.o
	var conns [2]*nats.Conn
	var jss [2]jetstream.JetStream
	for i := range conns {
		nc, err := nats.Connect(strings.Join(o.rawNATS, ","), nats.Name("orderd-bench pattern "+strconv.Itoa(i+1)))
		if err != nil {
			return rr, fmt.Errorf("pattern: connect: %w", err)
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return rr, fmt.Errorf("pattern: %w", err)
		}
		conns[i], jss[i] = nc, js
	}
	js := jss[0]
	tag := strings.ToUpper(strconv.FormatInt(time.Now().UnixNano(), 36))
	logName, eventsName := "ORDERD_BENCH_PATTERN_LOG_"+tag, "ORDERD_BENCH_PATTERN_EVENTS_"+tag
	logSubject, eventsPrefix := "orderd-bench.pattern."+tag+".log", "orderd-bench.pattern."+tag+".events"
	for _, sc := range []jetstream.StreamConfig{
		{Name: logName, Subjects: []string{logSubject}},
		{Name: eventsName, Subjects: []string{eventsPrefix + ".>"}, AllowAtomicPublish: true},
	} {
		drop, err := b.scratchStream(ctx, js, sc)
		if err != nil {
			return rr, fmt.Errorf("pattern: %w", err)
		}
		defer drop()
	}

	entry := make([]byte, o.patternGroup*o.patternOpBytes)
	event := make([]byte, o.rawSize)
	rand.Read(entry)
	rand.Read(event)

	cpuBefore := procsCPU(o.natsPIDs)
	start := time.Now()
	deadline := start.Add(o.duration)
	var (
		appended atomic.Int64 // webhooks in acked entries
		entries  atomic.Int64
		failed   atomic.Int64
		wake     = make(chan struct{}, 1)
		lat      [2][]time.Duration
		wg       sync.WaitGroup
	)
	for i := range 2 {
		wg.Go(func() {
			for k := 0; time.Now().Before(deadline) && ctx.Err() == nil; k++ {
				msg := nats.NewMsg(logSubject)
				msg.Data = entry
				msg.Header.Set(jetstream.MsgIDHeader, tag+"."+strconv.Itoa(i)+"."+strconv.Itoa(k))
				t := time.Now()
				pctx, cancel := context.WithTimeout(ctx, o.timeout)
				_, err := jss[i].PublishMsg(pctx, msg)
				cancel()
				if err != nil {
					failed.Add(1)
					continue
				}
				lat[i] = append(lat[i], time.Since(t))
				entries.Add(1)
				appended.Add(int64(o.patternGroup))
				select {
				case wake <- struct{}{}:
				default:
				}
			}
		})
	}

	// The consumers read until they have seen every entry the appenders
	// got acked (known once the appenders are done).
	var read [2]atomic.Int64
	readCtx, stopReading := context.WithCancel(ctx)
	defer stopReading()
	var readers sync.WaitGroup
	for i := range 2 {
		cons, err := jss[i].OrderedConsumer(ctx, logName, jetstream.OrderedConsumerConfig{})
		if err != nil {
			return rr, fmt.Errorf("pattern: follow the log: %w", err)
		}
		it, err := cons.Messages(jetstream.PullMaxMessages(512))
		if err != nil {
			return rr, fmt.Errorf("pattern: follow the log: %w", err)
		}
		readers.Go(func() {
			go func() { <-readCtx.Done(); it.Stop() }()
			for {
				if _, err := it.Next(); err != nil {
					return
				}
				read[i].Add(1)
			}
		})
	}

	// The relay: a batch as soon as the appenders have acked that many
	// webhooks more, and what remains once they are done.
	var published int64
	appendersDone := make(chan struct{})
	go func() { wg.Wait(); close(appendersDone) }()
	relayErr := func() error {
		done := false
		for {
			avail := appended.Load() - published
			n := int64(o.patternBatch)
			if avail < n {
				if !done {
					select {
					case <-wake:
					case <-appendersDone:
						done = true
					case <-ctx.Done():
						return ctx.Err()
					}
					continue
				}
				if avail == 0 {
					return nil
				}
				n = avail
			}
			if err := publishAtomic(ctx, conns[0], js, eventsPrefix, event, int(n), o.timeout); err != nil {
				return err
			}
			published += n
		}
	}()
	<-appendersDone
	if relayErr != nil {
		return rr, fmt.Errorf("pattern: relay: %w", relayErr)
	}
	// Every acked entry read by both consumers, or the round fails.
	want := entries.Load()
	for wait := time.Now().Add(30 * time.Second); read[0].Load() < want || read[1].Load() < want; {
		if time.Now().After(wait) {
			return rr, fmt.Errorf("pattern: the consumers read %d and %d of %d entries", read[0].Load(), read[1].Load(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
	rr.elapsed = time.Since(start)
	stopReading()
	readers.Wait()
	if err := ctx.Err(); err != nil {
		return rr, err
	}
	rr.answers = published
	rr.non2xx = failed.Load()
	rr.rate = float64(rr.answers) / rr.elapsed.Seconds()
	rr.p50, rr.p99 = percentiles(lat[:]...)
	if cpu := procsCPU(o.natsPIDs) - cpuBefore; cpu > 0 && rr.answers > 0 {
		rr.natsCPUPer1k = cpu.Seconds() / float64(rr.answers) * 1000
	}
	return rr, nil
}

// publishAtomic publishes n copies of payload as one atomic batch (each
// with its own message id, on a subject under prefix) and waits for the
// commit's ack, as the relay does.
func publishAtomic(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, prefix string, payload []byte, n int, timeout time.Duration) error {
	id := nuid.Next()
	for i := 1; i <= n; i++ {
		m := &nats.Msg{Subject: prefix + ".payin.completed", Data: payload, Header: nats.Header{
			jetstream.MsgIDHeader: {id + "." + strconv.Itoa(i)},
			"Nats-Batch-Id":       {id},
			"Nats-Batch-Sequence": {strconv.Itoa(i)},
		}}
		if i < n {
			if err := nc.PublishMsg(m); err != nil {
				return err
			}
			continue
		}
		m.Header.Set("Nats-Batch-Commit", "1")
		pctx, cancel := context.WithTimeout(ctx, timeout)
		_, err := js.PublishMsg(pctx, m)
		cancel()
		return err
	}
	return nil
}

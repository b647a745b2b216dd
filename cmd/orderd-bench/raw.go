package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// rawRound measures what the replicated log's transport gives without
// orderd: -c publishers sharing one connection, each publishing a message
// of -raw-size bytes to a scratch stream and waiting for its PubAck before
// the next, for -d. One shared connection is the stronger client: its
// publishers' messages go out together in the connection's writes, where
// as many connections each send one message at a time, and the servers
// answer more publishes a second to it (an orderd instance, too, appends
// over one connection). The scratch stream has the log's settings (file
// storage, -raw-replicas, the duplicate window, a message id on every
// publish), and is created before the round and deleted after it, so
// every round starts on an empty stream as the log's rounds do not (the
// log only grows), which favours the raw figure if anything.
func (b *bench) rawRound(ctx context.Context, round int) (roundResult, error) {
	rr := roundResult{target: "raw", round: round, cpuPer1k: -1, peakRSS: -1, drained: -1, unpublish: -1}
	nc, err := nats.Connect(strings.Join(b.o.rawNATS, ","), nats.Name("orderd-bench raw"))
	if err != nil {
		return rr, fmt.Errorf("raw: connect: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return rr, fmt.Errorf("raw: %w", err)
	}
	tag := strconv.FormatInt(time.Now().UnixNano(), 36)
	name, subject := "ORDERD_BENCH_RAW_"+strings.ToUpper(tag), "orderd-bench.raw."+tag
	drop, err := b.scratchStream(ctx, js, jetstream.StreamConfig{Name: name, Subjects: []string{subject}})
	if err != nil {
		return rr, fmt.Errorf("raw: %w", err)
	}
	defer drop()

	payload := make([]byte, b.o.rawSize)
	rand.Read(payload)

	cpuBefore := procsCPU(b.o.natsPIDs)
	var acked, failed atomic.Int64
	lat := make([][]time.Duration, b.o.conns)
	start := time.Now()
	deadline := start.Add(b.o.duration)
	var wg sync.WaitGroup
	for i := range b.o.conns {
		wg.Go(func() {
			msg := nats.NewMsg(subject)
			msg.Data = payload
			for k := 0; time.Now().Before(deadline) && ctx.Err() == nil; k++ {
				msg.Header = nats.Header{}
				msg.Header.Set(jetstream.MsgIDHeader, tag+"."+strconv.Itoa(i)+"."+strconv.Itoa(k))
				t := time.Now()
				pctx, cancel := context.WithTimeout(ctx, b.o.timeout)
				_, err := js.PublishMsg(pctx, msg)
				cancel()
				if err != nil {
					failed.Add(1)
					continue
				}
				lat[i] = append(lat[i], time.Since(t))
				acked.Add(1)
			}
		})
	}
	wg.Wait()
	rr.elapsed = time.Since(start)
	if err := ctx.Err(); err != nil {
		return rr, err
	}
	rr.answers = acked.Load()
	rr.non2xx = failed.Load()
	rr.rate = float64(rr.answers) / rr.elapsed.Seconds()
	rr.p50, rr.p99 = percentiles(lat...)
	if cpu := procsCPU(b.o.natsPIDs) - cpuBefore; cpu > 0 && rr.answers > 0 {
		rr.natsCPUPer1k = cpu.Seconds() / float64(rr.answers) * 1000
	}
	return rr, nil
}

// scratchStream creates a stream of sc's name and subjects with the
// replicated log's settings (file storage, -raw-replicas, a duplicate
// window) for one round; drop deletes it.
func (b *bench) scratchStream(ctx context.Context, js jetstream.JetStream, sc jetstream.StreamConfig) (drop func(), err error) {
	sc.Storage, sc.Replicas, sc.MaxAge, sc.Duplicates, sc.Discard = jetstream.FileStorage, b.o.rawReplicas, 168*time.Hour, 2*time.Minute, jetstream.DiscardOld
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := js.CreateStream(sctx, sc); err != nil {
		return nil, fmt.Errorf("create the scratch stream %s: %w", sc.Name, err)
	}
	return func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := js.DeleteStream(dctx, sc.Name); err != nil {
			b.logf("delete the scratch stream %s: %v", sc.Name, err)
		}
	}, nil
}

// percentiles is the median and the 99th percentile of the latencies in
// lats together; zero for none.
func percentiles(lats ...[]time.Duration) (p50, p99 time.Duration) {
	all := slices.Concat(lats...)
	if len(all) == 0 {
		return 0, 0
	}
	slices.Sort(all)
	return all[len(all)/2], all[len(all)*99/100]
}

// procsCPU is the user and system CPU time the processes pids have used
// so far (from /proc/PID/stat), summed; 0 for none.
func procsCPU(pids []int) time.Duration {
	var total time.Duration
	for _, pid := range pids {
		d, err := procCPU(pid)
		if err == nil {
			total += d
		}
	}
	return total
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/PID/stat's times:
// 100 on every Linux architecture Go builds for.
const clockTicks = 100

func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces; the fields follow its ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("unexpected /proc stat format")
	}
	f := strings.Fields(s[i+1:])
	// utime and stime are fields 14 and 15; f[0] is field 3.
	if len(f) < 13 {
		return 0, errors.New("unexpected /proc stat format")
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

//go:build chaos

package chaos_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// logStream is the log's stream (cluster.log_stream's default).
const logStream = "ORDERD_LOG"

// fault is one kind of fault. apply injects it and returns what it did
// and how to undo it; the network part of every fault is also undone by
// the lab's heal.
type fault struct {
	name string
	// side is "net" (links), "proc" (processes) or "disk"; a mixed
	// step pairs at most one net fault with one proc fault, and a disk
	// fault runs alone.
	side  string
	apply func(c *chaosRun) (what string, undo func(), err error)
}

// faults is the catalogue, in the order single-kind runs take them.
var faults = []fault{
	{"leader-cut-from-nats", "net", leaderCut},
	{"nats-node-isolated", "net", natsIsolated},
	{"nats-majority-cut-from-instances", "net", majorityCut},
	{"asymmetric-loss-delay", "net", lossDelay},
	{"flapping-links", "net", flap},
	{"pause-lease-holder", "proc", pauseHolder},
	{"pause-log-leader", "proc", pauseLogLeader},
	{"kill-nats-node", "proc", killNATS},
	{"kill-instance", "proc", killInstance},
	{"damaged-stream-files", "disk", damage},
}

// optInFaults are faults beyond what the suite's guarantees cover, run only
// when CHAOS_FAULTS names them: they show how orderd behaves when NATS
// itself loses acknowledged entries (the checker's "NATS lost acked log
// entries" verdict, and whether orderd refused).
var optInFaults = []fault{
	{"damaged-majority", "disk", damageMajority},
}

// faultKind is fault i of the catalogue followed by the opt-in faults.
func faultKind(i int) fault {
	if i < len(faults) {
		return faults[i]
	}
	return optInFaults[i-len(faults)]
}

// holder returns the instance the lease's last write names, as the suite
// watched it; any instance when none is known yet.
func (c *chaosRun) holder() *instance {
	h := c.lease.history()
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].node != "" {
			if o := c.w.byName(h[i].node); o != nil {
				return o
			}
		}
	}
	return c.w.ods[c.rng.IntN(len(c.w.ods))]
}

// logLeader returns the NATS node that leads the log stream, asking each
// node in turn; a random one when none answers.
func (c *chaosRun) logLeader() *natsNode {
	for _, n := range c.w.nats {
		if !n.p.running() {
			continue
		}
		nc, err := nats.Connect(n.url(), nats.Timeout(time.Second), nats.NoReconnect())
		if err != nil {
			continue
		}
		js, err := jetstream.New(nc)
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			var s jetstream.Stream
			if s, err = js.Stream(ctx, logStream); err == nil {
				info := s.CachedInfo()
				if info.Cluster != nil {
					for _, m := range c.w.nats {
						if m.h.name == info.Cluster.Leader {
							cancel()
							nc.Close()
							return m
						}
					}
				}
			}
			cancel()
		}
		nc.Close()
	}
	return c.w.nats[c.rng.IntN(len(c.w.nats))]
}

// duration is a fault's length: one to four lease TTLs, so a lease may
// move or not.
func (c *chaosRun) duration() time.Duration {
	return leaseTTL/2 + time.Duration(c.rng.Int64N(int64(3*leaseTTL)))
}

func leaderCut(c *chaosRun) (string, func(), error) {
	o := c.holder()
	for _, n := range c.w.nats {
		if err := c.w.lab.cut(o.h, n.h); err != nil {
			return "", nil, err
		}
	}
	return "lease holder " + o.name + " cut from n1 n2 n3", nil, nil
}

func natsIsolated(c *chaosRun) (string, func(), error) {
	n := c.w.nats[c.rng.IntN(3)]
	if c.rng.IntN(2) == 0 {
		n = c.logLeader() // the log's leader is the interesting one half the time
	}
	for _, m := range c.w.nats {
		if m != n {
			if err := c.w.lab.cut(n.h, m.h); err != nil {
				return "", nil, err
			}
		}
	}
	return "nats " + n.h.name + " cut from the other two", nil, nil
}

func majorityCut(c *chaosRun) (string, func(), error) {
	skip := c.rng.IntN(3)
	var names []string
	for i, n := range c.w.nats {
		if i == skip {
			continue
		}
		names = append(names, n.h.name)
		for _, o := range c.w.ods {
			if err := c.w.lab.cut(n.h, o.h); err != nil {
				return "", nil, err
			}
		}
	}
	return "nats " + strings.Join(names, " ") + " cut from both instances", nil, nil
}

// lossDelay degrades one direction of one link between an instance and a
// NATS node, or between two NATS nodes, and sometimes the way back with
// other figures: asymmetric either way.
func lossDelay(c *chaosRun) (string, func(), error) {
	var from, to *host
	n := c.w.nats[c.rng.IntN(3)].h
	if c.rng.IntN(2) == 0 {
		o := c.w.ods[c.rng.IntN(2)].h
		from, to = o, n
		if c.rng.IntN(2) == 0 {
			from, to = n, o
		}
	} else {
		m := c.w.nats[c.rng.IntN(3)].h
		for m == n {
			m = c.w.nats[c.rng.IntN(3)].h
		}
		from, to = n, m
	}
	what, err := c.w.lab.degrade(from, to, 0.05+0.35*c.rng.Float64(), 20+c.rng.IntN(300))
	if err != nil {
		return "", nil, err
	}
	if c.rng.IntN(3) == 0 {
		back, err := c.w.lab.degrade(to, from, 0.02*c.rng.Float64(), 1+c.rng.IntN(20))
		if err != nil {
			return "", nil, err
		}
		what += "; " + back
	}
	return what, nil, nil
}

// flap takes a NATS node's link down and up again, or an instance's paths
// to NATS (not to the provider, so that a call sent within the lease is
// not held back by the fault and delivered after it).
func flap(c *chaosRun) (string, func(), error) {
	stop := make(chan struct{})
	done := make(chan struct{})
	period := 200*time.Millisecond + time.Duration(c.rng.Int64N(int64(time.Second)))
	var what string
	var toggle func(down bool) error
	if c.rng.IntN(2) == 0 {
		n := c.w.nats[c.rng.IntN(3)]
		what = fmt.Sprintf("nats %s link flapping every %s", n.h.name, period.Round(time.Millisecond))
		toggle = func(down bool) error { return c.w.lab.setLink(n.h, !down) }
	} else {
		o := c.w.ods[c.rng.IntN(2)]
		what = fmt.Sprintf("instance %s paths to nats flapping every %s", o.name, period.Round(time.Millisecond))
		toggle = func(down bool) error {
			if !down {
				return c.w.lab.ipt(o.h, "-F", "CHAOS")
			}
			for _, n := range c.w.nats {
				if err := c.w.lab.dropFrom(o.h, n.h); err != nil {
					return err
				}
			}
			return nil
		}
	}
	go func() {
		defer close(done)
		down := false
		for {
			select {
			case <-stop:
				_ = toggle(false)
				return
			case <-time.After(period):
			}
			down = !down
			_ = toggle(down)
		}
	}()
	return what, func() { close(stop); <-done }, nil
}

func pauseHolder(c *chaosRun) (string, func(), error) {
	o := c.holder()
	o.p.pause()
	return "SIGSTOP lease holder " + o.name, func() { o.p.resume() }, nil
}

func pauseLogLeader(c *chaosRun) (string, func(), error) {
	n := c.logLeader()
	n.p.pause()
	return "SIGSTOP log leader nats " + n.h.name, func() { n.p.resume() }, nil
}

func killNATS(c *chaosRun) (string, func(), error) {
	i := c.rng.IntN(3)
	n := c.w.nats[i]
	n.p.kill()
	return "kill -9 nats " + n.h.name, func() { c.w.startNATS(i) }, nil
}

func killInstance(c *chaosRun) (string, func(), error) {
	o := c.w.ods[c.rng.IntN(2)]
	if c.rng.IntN(2) == 0 {
		o = c.holder()
	}
	o.p.kill()
	return "kill -9 instance " + o.name, func() { o.p = c.w.startInstance(o) }, nil
}

// damage stops one NATS node (a minority) with kill -9, then truncates the
// newest message block of its copy of the log stream or flips one byte in
// it, and starts it again when the fault ends. Only when the other two
// run: the damaged copy must be a minority's.
func damage(c *chaosRun) (string, func(), error) {
	for _, n := range c.w.nats {
		if !n.p.running() {
			return "", nil, fmt.Errorf("nats %s is down; a damaged copy would not be a minority's", n.h.name)
		}
	}
	i := c.rng.IntN(3)
	n := c.w.nats[i]
	n.p.kill()
	blks, _ := filepath.Glob(filepath.Join(n.streamDir(logStream), "msgs", "*.blk"))
	sort.Slice(blks, func(a, b int) bool { return blkNum(blks[a]) < blkNum(blks[b]) })
	what := "nats " + n.h.name + " killed; "
	if len(blks) == 0 {
		what += "no message block of " + logStream + " to damage"
	} else {
		blk := blks[len(blks)-1]
		fi, err := os.Stat(blk)
		if err != nil {
			return "", nil, err
		}
		size := fi.Size()
		switch {
		case size == 0:
			what += filepath.Base(blk) + " is empty, left alone"
		case c.rng.IntN(2) == 0:
			cut := size * int64(30+c.rng.IntN(65)) / 100
			if err := os.Truncate(blk, cut); err != nil {
				return "", nil, err
			}
			what += fmt.Sprintf("%s truncated from %d to %d bytes", filepath.Base(blk), size, cut)
		default:
			off := c.rng.Int64N(size)
			f, err := os.OpenFile(blk, os.O_RDWR, 0)
			if err != nil {
				return "", nil, err
			}
			b := make([]byte, 1)
			_, _ = f.ReadAt(b, off)
			b[0] ^= 1 << c.rng.IntN(8)
			_, err = f.WriteAt(b, off)
			f.Close()
			if err != nil {
				return "", nil, err
			}
			what += fmt.Sprintf("%s: one bit flipped at byte %d of %d", filepath.Base(blk), off, size)
		}
	}
	return what, func() { c.w.startNATS(i) }, nil
}

// damageMajority kills every NATS node, truncates the newest message block
// of the log on two of them to half, and starts those two first, so that
// they elect a leader of the shorter log before the third returns; the
// third starts when the fault ends. A majority's damaged files are beyond
// what JetStream promises to survive.
func damageMajority(c *chaosRun) (string, func(), error) {
	for _, n := range c.w.nats {
		n.p.kill()
	}
	keep := c.rng.IntN(3)
	var parts []string
	for i, n := range c.w.nats {
		if i == keep {
			continue
		}
		blks, _ := filepath.Glob(filepath.Join(n.streamDir(logStream), "msgs", "*.blk"))
		sort.Slice(blks, func(a, b int) bool { return blkNum(blks[a]) < blkNum(blks[b]) })
		if len(blks) == 0 {
			parts = append(parts, n.h.name+": no block")
			continue
		}
		blk := blks[len(blks)-1]
		fi, err := os.Stat(blk)
		if err != nil {
			return "", nil, err
		}
		if err := os.Truncate(blk, fi.Size()/2); err != nil {
			return "", nil, err
		}
		parts = append(parts, fmt.Sprintf("%s %s %d->%d bytes", n.h.name, filepath.Base(blk), fi.Size(), fi.Size()/2))
	}
	for i := range c.w.nats {
		if i != keep {
			c.w.startNATS(i)
		}
	}
	return "every nats node killed; log blocks truncated on " + strings.Join(parts, ", ") + "; those two started, " + c.w.nats[keep].h.name + " later",
		func() { c.w.startNATS(keep) }, nil
}

func blkNum(p string) int {
	var n int
	fmt.Sscanf(strings.TrimSuffix(filepath.Base(p), ".blk"), "%d", &n)
	return n
}

// schedule is a run's faults, from its seed: a single-kind run repeats
// its kind; a mixed run draws one or two faults per step (at most one net
// and one proc fault together; a disk fault alone).
func schedule(rng *rand.Rand, kind int) func() []fault {
	if kind >= 0 {
		return func() []fault { return []fault{faultKind(kind)} }
	}
	return func() []fault {
		f := faults[rng.IntN(len(faults))]
		if f.side == "disk" || rng.IntN(2) == 0 {
			return []fault{f}
		}
		for {
			g := faults[rng.IntN(len(faults))]
			if g.side != f.side && g.side != "disk" {
				return []fault{f, g}
			}
		}
	}
}

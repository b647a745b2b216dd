package main

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// profile is the part of a pprof profile (profile.proto) the breakdown
// needs: each sample's values and the function names on its stack, leaf
// first (inlined functions included).
type profile struct {
	types   []string // sample types, e.g. "cpu", "alloc_space"
	samples []sample
}

type sample struct {
	values []int64
	stack  []string
}

// readProfile reads a gzip-compressed (or plain) pprof profile.
func readProfile(path string) (*profile, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(raw) > 2 && raw[0] == 0x1f && raw[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if raw, err = io.ReadAll(zr); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	p, err := decodeProfile(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

type rawSample struct {
	locs   []uint64
	values []int64
}

func decodeProfile(b []byte) (*profile, error) {
	var (
		typeIdx []int64
		samples []rawSample
		locs    = map[uint64][]uint64{} // location id -> function ids, leaf first
		funcs   = map[uint64]int64{}    // function id -> name index
		strs    []string
	)
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		switch num {
		case 1: // sample_type
			return eachField(v, func(n protowire.Number, _ protowire.Type, _ []byte, x uint64) error {
				if n == 1 {
					typeIdx = append(typeIdx, int64(x))
				}
				return nil
			})
		case 2: // sample
			var s rawSample
			err := eachField(v, func(n protowire.Number, t protowire.Type, vv []byte, x uint64) error {
				switch n {
				case 1:
					return ints(t, vv, x, func(u uint64) { s.locs = append(s.locs, u) })
				case 2:
					return ints(t, vv, x, func(u uint64) { s.values = append(s.values, int64(u)) })
				}
				return nil
			})
			samples = append(samples, s)
			return err
		case 4: // location
			var id uint64
			var fns []uint64
			err := eachField(v, func(n protowire.Number, _ protowire.Type, vv []byte, x uint64) error {
				switch n {
				case 1:
					id = x
				case 4: // line
					return eachField(vv, func(ln protowire.Number, _ protowire.Type, _ []byte, lx uint64) error {
						if ln == 1 {
							fns = append(fns, lx)
						}
						return nil
					})
				}
				return nil
			})
			locs[id] = fns
			return err
		case 5: // function
			var id uint64
			var name int64
			err := eachField(v, func(n protowire.Number, _ protowire.Type, _ []byte, x uint64) error {
				switch n {
				case 1:
					id = x
				case 2:
					name = int64(x)
				}
				return nil
			})
			funcs[id] = name
			return err
		case 6: // string_table
			strs = append(strs, string(v))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	str := func(i int64) string {
		if i < 0 || int(i) >= len(strs) {
			return ""
		}
		return strs[i]
	}
	p := &profile{}
	for _, i := range typeIdx {
		p.types = append(p.types, str(i))
	}
	for _, rs := range samples {
		s := sample{values: rs.values}
		for _, l := range rs.locs {
			for _, f := range locs[l] {
				s.stack = append(s.stack, str(funcs[f]))
			}
		}
		p.samples = append(p.samples, s)
	}
	return p, nil
}

// eachField calls fn for each field of a protobuf message: v is the bytes
// of a length-delimited field, x the value of a varint or fixed one.
func eachField(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var (
			v []byte
			x uint64
		)
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.Fixed64Type:
			x, n = protowire.ConsumeFixed64(b)
		case protowire.Fixed32Type:
			var x32 uint32
			x32, n = protowire.ConsumeFixed32(b)
			x = uint64(x32)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := fn(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}

// ints reads a repeated integer field, packed or not.
func ints(typ protowire.Type, v []byte, x uint64, add func(uint64)) error {
	if typ != protowire.BytesType {
		add(x)
		return nil
	}
	for len(v) > 0 {
		u, n := protowire.ConsumeVarint(v)
		if n < 0 {
			return protowire.ParseError(n)
		}
		add(u)
		v = v[n:]
	}
	return nil
}

// category is one line of the breakdown: a sample belongs to the first
// category (in the order of categories) any of whose markers is a prefix
// of, or contained in, a function on its stack.
type category struct {
	name    string
	markers []string
}

// categories sort the daemon's work by what a webhook costs. The order
// matters: a relay's SQLite read is the relay's, not the store's, and the
// marking commits the relay hands the writer are the relay's too.
var categories = []category{
	{"GC: background marking, sweeping, scavenging", []string{"runtime.gcBgMarkWorker", "runtime.bgsweep", "runtime.bgscavenge"}},
	{"GC: assists during allocations", []string{"runtime.gcAssistAlloc"}},
	{"signature check (base64, SHA-512, RSA-2048 verify)", []string{"orderd/provider.(*Verifier)", "crypto/internal/fips140/rsa.", "crypto/rsa."}},
	{"relay: moving the outbox cursor (writer's SQLite)", []string{"orderd/store.(*Store).MarkPublishedThrough", "orderd/store.(*advanceOutboxCmd)"}},
	{"store writer: commit (WAL write, fsync, page cache)", []string{"database/sql.(*Tx).Commit", "modernc.org/sqlite/lib._vdbeCommit"}},
	{"store writer: applying webhooks (SQLite statements)", []string{"orderd/store.(*Tx).apply", "orderd/store.(*observeCmd)"}},
	{"store writer: other (begin, batching, queue)", []string{"orderd/store.(*Store).run", "orderd/store.(*Store).commitBatch"}},
	{"relay: reading the outbox (SQLite)", []string{"orderd/store.(*Store).PendingEvents"}},
	{"relay: encoding, batching, awaiting acks", []string{"orderd/publish."}},
	{"NATS client (publish, acks)", []string{"github.com/nats-io/nats.go"}},
	{"embedded NATS server (JetStream store, fsync)", []string{"github.com/nats-io/nats-server/"}},
	{"decode (provider.DecodeOrder)", []string{"orderd/provider.DecodeOrder"}},
	{"fingerprint, event id, headers (before the writer)", []string{"orderd/provider.(*Order).Fingerprint", "orderd/store.prepareObservation", "orderd/store.EventID", "orderd/store.selectHeaders"}},
	{"receiver: handler, metrics, store hand-off", []string{"orderd/receiver."}},
	{"HTTP server (net/http: requests, responses)", []string{"net/http."}},
	{"metrics and logging", []string{"github.com/prometheus/", "go.uber.org/zap", "log/slog"}},
	{"Go scheduler, timers, network poller", []string{"runtime.schedule", "runtime.findRunnable", "runtime.mcall", "runtime.netpoll", "runtime.park_m", "runtime.goexit0", "runtime.sysmon", "runtime.timerproc"}},
}

const otherCategory = "other"

// classify returns the category of a stack.
func classify(stack []string) string {
	for _, c := range categories {
		for _, m := range c.markers {
			for _, f := range stack {
				if strings.Contains(f, m) {
					return c.name
				}
			}
		}
	}
	return otherCategory
}

// share is one category's part of a profile.
type share struct {
	name     string
	value    int64
	fraction float64
}

// breakdown sums the samples' values of type typ by category, largest
// first, "other" last.
func breakdown(p *profile, typ string) ([]share, int64, error) {
	idx := slices.Index(p.types, typ)
	if idx < 0 {
		return nil, 0, fmt.Errorf("profile has no %q values (it has %q)", typ, p.types)
	}
	sums := map[string]int64{}
	var total int64
	for _, s := range p.samples {
		if idx >= len(s.values) {
			continue
		}
		sums[classify(s.stack)] += s.values[idx]
		total += s.values[idx]
	}
	if total == 0 {
		return nil, 0, errors.New("profile has no samples")
	}
	var out []share
	for name, v := range sums {
		out = append(out, share{name: name, value: v, fraction: float64(v) / float64(total)})
	}
	slices.SortFunc(out, func(a, b share) int {
		switch {
		case a.name == otherCategory:
			return 1
		case b.name == otherCategory:
			return -1
		case a.value != b.value:
			return cmp.Compare(b.value, a.value)
		}
		return strings.Compare(a.name, b.name)
	})
	return out, total, nil
}

// printBreakdown writes where the CPU and the allocations of the profile
// round went, per webhook: the CPU profile's shares of the round's CPU
// seconds per webhook, and the allocation profile's bytes and objects
// divided by the webhooks answered while it was taken (rate × seconds).
func printBreakdown(w io.Writer, dir string, pr profileRound) error {
	cpuPer1k, rate, seconds := pr.CPUPer1k, pr.Rate, pr.Seconds
	cpu, err := readProfile(filepath.Join(dir, "cpu.pprof"))
	if err != nil {
		return err
	}
	shares, _, err := breakdown(cpu, "cpu")
	if err != nil {
		return fmt.Errorf("cpu.pprof: %w", err)
	}
	perHook := cpuPer1k * 1000 // µs of CPU per webhook
	fmt.Fprintf(w, "\nwhere the CPU goes: %.0f µs per webhook (the profile round's CPU seconds per 1,000 webhooks, relay included)\n", perHook)
	fmt.Fprintf(w, "| %-52s | %6s | %10s |\n|%s|%s|%s|\n", "part", "share", "µs/webhook", strings.Repeat("-", 54), strings.Repeat("-", 8), strings.Repeat("-", 12))
	for _, s := range shares {
		fmt.Fprintf(w, "| %-52s | %5.1f%% | %10.1f |\n", s.name, 100*s.fraction, s.fraction*perHook)
	}

	allocs, err := readProfile(filepath.Join(dir, "allocs.pprof"))
	if err != nil {
		return err
	}
	hooks := rate * seconds
	if hooks <= 0 {
		return nil
	}
	bytesShares, totalBytes, err := breakdown(allocs, "alloc_space")
	if err != nil {
		return fmt.Errorf("allocs.pprof: %w", err)
	}
	objShares, totalObjs, err := breakdown(allocs, "alloc_objects")
	if err != nil {
		return fmt.Errorf("allocs.pprof: %w", err)
	}
	objs := map[string]int64{}
	for _, s := range objShares {
		objs[s.name] = s.value
	}
	fmt.Fprintf(w, "\nwhere the allocations go: %.1f KiB and %.0f objects per webhook (%.0f webhooks in the %.0fs profiled)\n",
		float64(totalBytes)/hooks/1024, float64(totalObjs)/hooks, hooks, seconds)
	fmt.Fprintf(w, "| %-52s | %6s | %12s | %15s |\n|%s|%s|%s|%s|\n", "part", "bytes", "KiB/webhook", "objects/webhook",
		strings.Repeat("-", 54), strings.Repeat("-", 8), strings.Repeat("-", 14), strings.Repeat("-", 17))
	for _, s := range bytesShares {
		fmt.Fprintf(w, "| %-52s | %5.1f%% | %12.2f | %15.1f |\n", s.name, 100*s.fraction, float64(s.value)/hooks/1024, float64(objs[s.name])/hooks)
	}
	return nil
}

// profileRound is what the breakdown needs of the round the profiles were
// taken in; run writes it next to them as round.json, so that -explain can
// print the breakdown again later.
type profileRound struct {
	CPUPer1k float64 `json:"cpu_s_per_1k"`
	Rate     float64 `json:"rate"`
	Seconds  float64 `json:"seconds"`
}

func writeProfileRound(dir string, pr profileRound) error {
	b, err := json.Marshal(pr)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "round.json"), append(b, '\n'), 0o644)
}

// explain prints the breakdown of profiles an earlier run left in dir.
func explain(w io.Writer, dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "round.json"))
	if err != nil {
		return err
	}
	var pr profileRound
	if err := json.Unmarshal(b, &pr); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(dir, "round.json"), err)
	}
	return printBreakdown(w, dir, pr)
}

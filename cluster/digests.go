package cluster

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"orderd/store"
)

// Instances compare what they hold.
//
// Every DigestEvery log sequences (a checkpoint), each instance digests its
// replicated state (store.ReadSnapshot.Digest, every row of every
// replicated table) as it stands right after it applied the checkpoint's
// entry, and records the digest in the digests bucket, where every
// instance reads the others'. The applier goes on meanwhile: the digest
// reads a snapshot of the database pinned at the checkpoint. Each
// instance also records itself as a member (its node name, applied
// sequence and when), every few seconds.
//
// The agreed sequence is the last checkpoint at which every member that
// reported in the last memberFresh held the same digest as this instance.
// A checkpoint at which two instances' digests differ is a divergence: the
// orderd_replica_digest_mismatch gauge is 1 while the newest compared
// checkpoint shows one, and a replica_divergence finding names both
// instances and the sequence. Only one digest is made at a time, and one
// more waits; a checkpoint that comes while one waits is left out.

// memberFresh is how recently an instance must have reported to count as
// a member whose digest the agreed sequence waits for.
const memberFresh = 2 * time.Minute

// keptCheckpoints is how many of its own checkpoints an instance keeps
// comparing (peers may post theirs later).
const keptCheckpoints = 8

// DigestRecord is one instance's state digest at a checkpoint.
type DigestRecord struct {
	Node   string    `json:"node"`
	Seq    uint64    `json:"seq"`
	Digest string    `json:"digest"`
	At     time.Time `json:"at"`
}

// Member is an instance as the digests bucket knows it.
type Member struct {
	Node string `json:"node"`
	// AppliedSeq is the last log sequence it applied when it reported.
	AppliedSeq uint64 `json:"appliedSeq"`
	// Error says why it cannot follow the log, if it cannot.
	Error string `json:"error,omitempty"`
	// SeenAt is when it last reported.
	SeenAt time.Time `json:"seenAt"`
	// Release is the orderd release it runs and Reads the log versions
	// it reads (nil from a release before log versions).
	Release string    `json:"release,omitempty"`
	Reads   *Versions `json:"reads,omitempty"`
}

// digests is a node's side of the comparison.
type digests struct {
	mu sync.Mutex
	// own are this instance's newest checkpoints, oldest first.
	own []DigestRecord
	// agreed is the last checkpoint every member agreed on.
	agreed uint64
	// mismatch describes the standing divergence ("" for none).
	mismatch string
	// reported holds the checkpoints a finding was opened for.
	reported map[uint64]bool
	// peers holds the other instances' digests at this instance's
	// checkpoints, by node, as last read.
	peers map[uint64]map[string]string
}

// digestKey is where an instance records its digest at seq. The digest
// leaves out the columns background migrations derive (store's
// ReadSnapshot.Digest) since the release that brought background
// migrations; releases before it digested every column under "seq.…".
// The two forms never compare equal, so each has its own keys: during a
// rolling upgrade from such a release, an instance compares only with the
// instances of its own form, and the agreed sequence waits for the others
// (no false replica_divergence) until every instance runs one form.
func digestKey(seq uint64, node string) string {
	return fmt.Sprintf("%s%020d.%s", digestPrefix, seq, hex.EncodeToString([]byte(node)))
}

// digestPrefix begins the keys of this release's digests (see digestKey).
const digestPrefix = "state."

func memberKey(node string) string { return "member." + hex.EncodeToString([]byte(node)) }

// isCheckpoint reports whether seq is a checkpoint.
func (n *Node) isCheckpoint(seq uint64) bool {
	return n.cfg.DigestEvery > 0 && seq > 0 && seq%n.cfg.DigestEvery == 0
}

// checkpoint digests the replicated state at seq, which the applier has
// just applied (and nothing after it), in the background: it pins a read
// snapshot of the database here and hands it to digestLoop. One snapshot
// waits while another is digested; a checkpoint that finds one waiting
// is left out.
func (n *Node) checkpoint(ctx context.Context, seq uint64) {
	if n.dkv == nil || n.digestq == nil {
		return
	}
	snap, err := n.store.ReadSnapshot(ctx)
	if err != nil {
		if ctx.Err() == nil {
			n.cfg.Logger.Warn("could not read the state at a checkpoint", "seq", seq, "err", err)
		}
		return
	}
	if snap.Seq != seq {
		snap.Close()
		return
	}
	select {
	case n.digestq <- snap:
	default:
		snap.Close()
		n.cfg.Logger.Info("state digests are still being made; this checkpoint is left out", "seq", seq)
	}
}

// digestLoop digests the snapshots checkpoint pins, one at a time,
// records each digest and compares it with the other instances'.
func (n *Node) digestLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			// A snapshot still waiting is released.
			select {
			case snap := <-n.digestq:
				snap.Close()
			default:
			}
			return
		case snap := <-n.digestq:
			n.digest(ctx, snap)
		}
	}
}

// digest digests snap, records the digest and compares.
func (n *Node) digest(ctx context.Context, snap *store.ReadSnapshot) {
	seq := snap.Seq
	start := time.Now()
	d, err := snap.Digest(ctx)
	snap.Close()
	if err != nil {
		if ctx.Err() == nil {
			n.cfg.Logger.Warn("could not digest the state at a checkpoint", "seq", seq, "err", err)
		}
		return
	}
	rec := DigestRecord{Node: n.cfg.Node, Seq: seq, Digest: d, At: time.Now().UTC()}
	n.cfg.Logger.Debug("state digest", "seq", seq, "digest", d, "took", time.Since(start))
	n.dg.mu.Lock()
	n.dg.own = append(n.dg.own, rec)
	if len(n.dg.own) > keptCheckpoints {
		n.dg.own = n.dg.own[len(n.dg.own)-keptCheckpoints:]
	}
	n.dg.mu.Unlock()
	b, _ := json.Marshal(rec)
	pctx, cancel := context.WithTimeout(ctx, apiTimeout)
	_, err = n.dkv.Put(pctx, digestKey(seq, n.cfg.Node), b)
	cancel()
	if err != nil && ctx.Err() == nil {
		n.cfg.Logger.Warn("could not record the state digest", "seq", seq, "err", err)
	}
	n.compareDigests(ctx)
}

// report records this instance as a member.
func (n *Node) report(ctx context.Context) {
	if n.dkv == nil {
		return
	}
	reads := ownVersions
	m := Member{Node: n.cfg.Node, AppliedSeq: n.AppliedSeq(), SeenAt: time.Now().UTC(), Release: n.release(), Reads: &reads}
	if err := n.Fatal(); err != nil {
		m.Error = err.Error()
	}
	b, _ := json.Marshal(m)
	pctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	if _, err := n.dkv.Put(pctx, memberKey(n.cfg.Node), b); err != nil && ctx.Err() == nil {
		n.cfg.Logger.Debug("could not report to the digests bucket", "err", err)
	}
}

// Members lists the instances that reported to the digests bucket, by
// name.
func (n *Node) Members(ctx context.Context) ([]Member, error) {
	if n.dkv == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	recs, err := kvValues[Member](ctx, n.dkv, "member.*")
	if err != nil {
		return nil, err
	}
	slices.SortFunc(recs, func(a, b Member) int { return strings.Compare(a.Node, b.Node) })
	return recs, nil
}

// kvValues reads the JSON values of the keys matching filter.
func kvValues[T any](ctx context.Context, kv jetstream.KeyValue, filter string) ([]T, error) {
	lister, err := kv.ListKeysFiltered(ctx, filter)
	if err != nil {
		return nil, err
	}
	// The lister stops by itself once it delivered every key.
	defer lister.Stop()
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	var out []T
	for _, k := range keys {
		e, err := kv.Get(ctx, k)
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var v T
		if json.Unmarshal(e.Value(), &v) == nil {
			out = append(out, v)
		}
	}
	return out, nil
}

// compareDigests compares this instance's recent checkpoints with every
// other instance's digests there, and updates the agreed sequence, the
// mismatch gauge and the findings.
func (n *Node) compareDigests(ctx context.Context) {
	n.dg.mu.Lock()
	own := slices.Clone(n.dg.own)
	n.dg.mu.Unlock()
	if len(own) == 0 || n.dkv == nil {
		return
	}
	members, err := n.Members(ctx)
	if err != nil {
		return
	}
	fresh := map[string]bool{}
	for _, m := range members {
		if time.Since(m.SeenAt) < memberFresh && m.Node != n.cfg.Node {
			fresh[m.Node] = true
		}
	}
	agreed, mismatch, newestCompared := uint64(0), "", uint64(0)
	for _, mine := range own {
		// The peers' digests at this checkpoint: once every fresh
		// member's is known, the bucket is not read for it again.
		n.dg.mu.Lock()
		known := maps.Clone(n.dg.peers[mine.Seq])
		n.dg.mu.Unlock()
		complete := len(known) > 0
		for m := range fresh {
			_, ok := known[m]
			complete = complete && ok
		}
		if !complete {
			lctx, cancel := context.WithTimeout(ctx, apiTimeout)
			recs, err := kvValues[DigestRecord](lctx, n.dkv, fmt.Sprintf("%s%020d.*", digestPrefix, mine.Seq))
			cancel()
			if err != nil {
				return
			}
			known = map[string]string{}
			for _, r := range recs {
				if r.Node != n.cfg.Node && r.Seq == mine.Seq {
					known[r.Node] = r.Digest
				}
			}
			n.dg.mu.Lock()
			if n.dg.peers == nil {
				n.dg.peers = map[uint64]map[string]string{}
			}
			n.dg.peers[mine.Seq] = known
			for seq := range n.dg.peers {
				if seq < own[0].Seq {
					delete(n.dg.peers, seq)
				}
			}
			n.dg.mu.Unlock()
		}
		have := map[string]bool{}
		var diff []DigestRecord
		for _, node := range slices.Sorted(maps.Keys(known)) {
			have[node] = true
			if d := known[node]; d != mine.Digest {
				diff = append(diff, DigestRecord{Node: node, Seq: mine.Seq, Digest: d})
			}
		}
		if len(have) > 0 {
			newestCompared = mine.Seq
			mismatch = ""
		}
		if len(diff) > 0 {
			var names []string
			for _, r := range diff {
				names = append(names, fmt.Sprintf("%s has %.16s…", r.Node, r.Digest))
			}
			mismatch = fmt.Sprintf("at log sequence %d %s has state digest %.16s… but %s", mine.Seq, n.cfg.Node, mine.Digest, strings.Join(names, ", "))
			n.reportDivergence(ctx, mine, diff)
			continue
		}
		all := true
		for m := range fresh {
			all = all && have[m]
		}
		if all && len(have) > 0 {
			agreed = mine.Seq
		}
	}
	n.dg.mu.Lock()
	if agreed > n.dg.agreed {
		n.dg.agreed = agreed
	}
	if newestCompared > 0 {
		n.dg.mismatch = mismatch
	}
	a, mm := n.dg.agreed, n.dg.mismatch
	n.dg.mu.Unlock()
	n.m.agreedSeq.Set(float64(a))
	if mm != "" {
		n.m.digestMismatch.Set(1)
	} else {
		n.m.digestMismatch.Set(0)
	}
}

// reportDivergence logs a divergence at a checkpoint and opens a
// replica_divergence finding for it (once per checkpoint and instance;
// every instance that sees it opens the same finding, which the store
// keeps once).
func (n *Node) reportDivergence(ctx context.Context, mine DigestRecord, diff []DigestRecord) {
	n.dg.mu.Lock()
	if n.dg.reported == nil {
		n.dg.reported = map[uint64]bool{}
	}
	done := n.dg.reported[mine.Seq]
	n.dg.reported[mine.Seq] = true
	n.dg.mu.Unlock()
	if done {
		return
	}
	rd := store.ReplicaDivergence{Seq: mine.Seq, Instances: []store.ReplicaDigest{{Node: mine.Node, Digest: mine.Digest}},
		Action: "the instances hold different states at the same log sequence: stop the one whose state is wrong and restart it on an empty disk (docs/replicated-mode.md, When instances disagree)"}
	for _, r := range diff {
		rd.Instances = append(rd.Instances, store.ReplicaDigest{Node: r.Node, Digest: r.Digest})
	}
	slices.SortFunc(rd.Instances, func(a, b store.ReplicaDigest) int { return strings.Compare(a.Node, b.Node) })
	detail, _ := json.Marshal(rd)
	n.cfg.Logger.Error("instances hold different states at the same log sequence", "seq", mine.Seq, "digest", mine.Digest, "others", string(detail))
	if n.Fatal() != nil {
		return
	}
	ectx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	_, err := n.Execute(ectx, []store.Op{{At: time.Now().UTC(), Cmd: &store.OpenFindingCmd{
		FindingKind: store.FindingReplicaDivergence, Key: fmt.Sprint(mine.Seq), Detail: detail}}})
	if err != nil && ctx.Err() == nil {
		n.cfg.Logger.Warn("could not open the replica_divergence finding", "seq", mine.Seq, "err", err)
	}
}

// DigestStatus is GET /v1/cluster's view of the comparison.
type DigestStatus struct {
	// AgreedSeq is the last checkpoint at which every member's digest
	// matched this instance's.
	AgreedSeq uint64
	// Last is this instance's newest checkpoint digest.
	Last *DigestRecord
	// Mismatch describes a standing divergence.
	Mismatch string
}

func (n *Node) digestStatus() DigestStatus {
	n.dg.mu.Lock()
	defer n.dg.mu.Unlock()
	ds := DigestStatus{AgreedSeq: n.dg.agreed, Mismatch: n.dg.mismatch}
	if len(n.dg.own) > 0 {
		last := n.dg.own[len(n.dg.own)-1]
		ds.Last = &last
	}
	return ds
}

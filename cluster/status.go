package cluster

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Status is GET /v1/cluster's answer.
type Status struct {
	Node string `json:"node"`
	// Log is the id of the log this instance follows.
	Log     string `json:"log"`
	Leader  string `json:"leader"`
	Leading bool   `json:"leading"`
	// Term identifies the current lease: the lease bucket's revision at
	// which its holder took it. A takeover always makes it larger, and
	// the same term is the same lease, but it does not grow by one: every
	// renewal writes the bucket too, so it jumps by the renewals in
	// between (1 to 12 over one takeover is normal). Compare terms; do
	// not count takeovers by their difference.
	Term uint64 `json:"term"`
	// LogLastSeq is the log's last sequence; AppliedSeq this instance's
	// last applied one; Lag the difference.
	LogLastSeq uint64        `json:"logLastSeq"`
	AppliedSeq uint64        `json:"appliedSeq"`
	Lag        uint64        `json:"lag"`
	Snapshot   *SnapshotInfo `json:"snapshot"`
	// AgreedSeq is the last log sequence at which every instance's
	// state digest matched (0 before the first such checkpoint).
	AgreedSeq uint64 `json:"agreedSeq"`
	// DigestEvery is how many log sequences apart the checkpoints are;
	// Digest this instance's newest checkpoint digest.
	DigestEvery uint64        `json:"digestEvery"`
	Digest      *DigestRecord `json:"digest,omitempty"`
	// Divergence describes a standing mismatch of digests.
	Divergence string `json:"divergence,omitempty"`
	// Members are the instances that reported to the digests bucket,
	// with their applied sequences.
	Members []Member `json:"members"`
	// LogVersion is the log version in force, the instances that read
	// the log and what they read, and what keeps the version from
	// rising.
	LogVersion LogVersionStatus `json:"logVersion"`
	// Error says why this instance cannot follow the log, if it cannot.
	Error string `json:"error,omitempty"`
}

// statusTimeout bounds Status's reads of the cluster's assets together:
// GET /v1/cluster answers within it even while JetStream is slow to
// answer (a node lost, its groups electing), when the answer is most
// needed; what was not read by then is named in Error.
const statusTimeout = 1500 * time.Millisecond

// Status describes the cluster as this node sees it. What cannot be read
// (no quorum, or not within statusTimeout) is left zero and named in
// Error; what this instance knows of itself is always there.
func (n *Node) Status(ctx context.Context) Status {
	ds := n.digestStatus()
	st := Status{Node: n.cfg.Node, Log: n.logID, Leading: n.Leading(), AppliedSeq: n.AppliedSeq(),
		AgreedSeq: ds.AgreedSeq, DigestEvery: n.cfg.DigestEvery, Digest: ds.Last, Divergence: ds.Mismatch, Members: []Member{}}
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	// The reads are independent: they go at once and share the bound.
	var (
		wg     sync.WaitGroup
		leader string
		term   uint64
		herr   error
		info   *jetstream.StreamInfo
		ierr   error
		lv     LogVersionStatus
		lverr  error
		si     SnapshotInfo
		sok    bool
		serr   error
		ms     []Member
		merr   error
	)
	wg.Go(func() { leader, term, herr = n.Holder(ctx) })
	wg.Go(func() {
		info, ierr = n.streamInfo(ctx)
		in := info
		if ierr != nil {
			in = nil
		}
		lv, lverr = n.logVersionStatus(ctx, in)
	})
	wg.Go(func() { si, sok, serr = n.LatestSnapshot(ctx) })
	wg.Go(func() { ms, merr = n.Members(ctx) })
	wg.Wait()

	var errs []string
	if err := n.Fatal(); err != nil {
		errs = append(errs, err.Error())
	}
	if herr == nil {
		st.Leader, st.Term = leader, term
	} else {
		errs = append(errs, "lease: "+herr.Error())
	}
	if ierr == nil {
		st.LogLastSeq = info.State.LastSeq
		if st.LogLastSeq > st.AppliedSeq {
			st.Lag = st.LogLastSeq - st.AppliedSeq
		}
	} else {
		errs = append(errs, ierr.Error())
	}
	if serr != nil {
		errs = append(errs, "snapshots: "+serr.Error())
	} else if sok {
		st.Snapshot = &si
	}
	st.LogVersion = lv
	if lverr != nil {
		errs = append(errs, "log readers: "+lverr.Error())
	}
	if merr == nil && ms != nil {
		st.Members = ms
		if n.Fatal() != nil {
			if m, ok := mostAdvanced(ms); ok {
				errs = append(errs, fmt.Sprintf("of the instances that reported, %s applied the most (up to %d, reported %s)", m.Node, m.AppliedSeq, m.SeenAt.Format(time.RFC3339)))
			}
		}
	} else if merr != nil {
		errs = append(errs, "members: "+merr.Error())
	}
	st.Error = strings.Join(errs, "; ")
	return st
}

// mostAdvanced is the member that applied the most of the log.
func mostAdvanced(ms []Member) (Member, bool) {
	var best Member
	for _, m := range ms {
		if m.AppliedSeq > best.AppliedSeq {
			best = m
		}
	}
	return best, best.Node != ""
}

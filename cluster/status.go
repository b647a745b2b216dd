package cluster

import (
	"context"
	"fmt"
	"time"
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

// Status describes the cluster as this node sees it. What cannot be read
// (no quorum) is left zero and named in Error.
func (n *Node) Status(ctx context.Context) Status {
	ds := n.digestStatus()
	st := Status{Node: n.cfg.Node, Log: n.logID, Leading: n.Leading(), AppliedSeq: n.AppliedSeq(),
		AgreedSeq: ds.AgreedSeq, DigestEvery: n.cfg.DigestEvery, Digest: ds.Last, Divergence: ds.Mismatch, Members: []Member{}}
	var errs []string
	if err := n.Fatal(); err != nil {
		errs = append(errs, err.Error())
	}
	if leader, term, err := n.Holder(ctx); err == nil {
		st.Leader, st.Term = leader, term
	} else {
		errs = append(errs, "lease: "+err.Error())
	}
	if last, err := n.lastSeq(ctx); err == nil {
		st.LogLastSeq = last
		if last > st.AppliedSeq {
			st.Lag = last - st.AppliedSeq
		}
	} else {
		errs = append(errs, err.Error())
	}
	if si, ok, err := n.LatestSnapshot(ctx); err == nil && ok {
		st.Snapshot = &si
	} else if err != nil {
		errs = append(errs, "snapshots: "+err.Error())
	}
	info, ierr := n.streamInfo(ctx)
	if ierr != nil {
		info = nil
	}
	if lv, err := n.logVersionStatus(ctx, info); err == nil {
		st.LogVersion = lv
	} else {
		st.LogVersion = lv
		errs = append(errs, "log readers: "+err.Error())
	}
	if ms, err := n.Members(ctx); err == nil && ms != nil {
		st.Members = ms
		if n.Fatal() != nil {
			if m, ok := mostAdvanced(ms); ok {
				errs = append(errs, fmt.Sprintf("of the instances that reported, %s applied the most (up to %d, reported %s)", m.Node, m.AppliedSeq, m.SeenAt.Format(time.RFC3339)))
			}
		}
	} else if err != nil {
		errs = append(errs, "members: "+err.Error())
	}
	for i, e := range errs {
		if i > 0 {
			st.Error += "; "
		}
		st.Error += e
	}
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

package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"orderd/store"
)

// The log version: which form of entry the instances write.
//
// A release reads a range of log versions (store.OldestLogVersion to
// store.NewestLogVersion) and may write any of them. The version in force
// is recorded on the log stream (logVersionKey) and every instance writes
// it; it only rises. The lease holder raises it to the newest version it
// reads once every instance that follows the log reads that version too.
// Until then a mixed cluster, old releases and new, writes the old form,
// which every one of them applies, and keeps both legs.
//
// The readers of the log are known two ways, both read from NATS:
//
//   - the members of the digests bucket that reported in the last
//     memberFresh, each with its release and the versions it reads;
//   - the consumers on the log stream that were active in the last
//     memberFresh. This release's consumers say in their metadata which
//     versions they read; a consumer that says nothing is a reader of an
//     earlier release (or another program), taken to read only the oldest
//     version.
//
// An instance that was away while the version rose, and does not read
// it, stops at the first entry it cannot decode (as before there were
// versions), and its error names the release that raised the version.

// Log stream metadata of the version in force.
const (
	logVersionKey        = "orderd_log_version"
	logVersionReleaseKey = "orderd_log_version_release"
)

// Log consumer metadata: what the reading instance is and reads.
const (
	consumerNodeKey    = "orderd_node"
	consumerReleaseKey = "orderd_release"
	consumerReadsKey   = "orderd_reads"
)

// Versions is a range of log versions an instance reads.
type Versions struct {
	Oldest int `json:"oldest"`
	Newest int `json:"newest"`
}

func (v Versions) String() string { return fmt.Sprintf("%d-%d", v.Oldest, v.Newest) }

func (v Versions) reads(version int) bool { return v.Oldest <= version && version <= v.Newest }

// parseVersions reads Versions.String's form.
func parseVersions(s string) (Versions, bool) {
	a, b, ok := strings.Cut(s, "-")
	lo, err1 := strconv.Atoi(a)
	hi, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || lo < 1 || hi < lo {
		return Versions{}, false
	}
	return Versions{lo, hi}, true
}

// ownVersions are the versions this release reads.
var ownVersions = Versions{store.OldestLogVersion, store.NewestLogVersion}

// unannounced is what a reader that does not say is taken to read.
var unannounced = Versions{store.OldestLogVersion, store.OldestLogVersion}

// Reader is one reader of the log as GET /v1/cluster lists it.
type Reader struct {
	// Node is the instance's name ("" for a consumer that does not say).
	Node string `json:"node,omitempty"`
	// Release is the orderd release it runs, as it says.
	Release string `json:"release,omitempty"`
	// Reads are the log versions it reads.
	Reads Versions `json:"reads"`
	// Announced is false for a consumer of the log that does not say
	// what it reads: a release from before log versions (or another
	// program), taken to read only the oldest version.
	Announced bool `json:"announced"`
	// Consumer names its consumer on the log stream, if one was seen.
	Consumer string `json:"consumer,omitempty"`
	// SeenAt is when it last reported or read.
	SeenAt time.Time `json:"seenAt"`
}

// LogVersionStatus is the log version as GET /v1/cluster shows it.
type LogVersionStatus struct {
	// InForce is the version every instance writes.
	InForce int `json:"inForce"`
	// RaisedBy is the release that raised it ("" while it is the
	// oldest, never raised).
	RaisedBy string `json:"raisedBy,omitempty"`
	// Reads are the versions this instance reads.
	Reads Versions `json:"reads"`
	// Readers are the instances that followed the log recently.
	Readers []Reader `json:"readers"`
	// Next is the version the lease holder would raise it to (0 when
	// it is the newest this instance reads), and HeldBy the readers
	// that do not read it yet, each as "<node or consumer> (reads
	// <oldest>-<newest>)".
	Next   int      `json:"next,omitempty"`
	HeldBy []string `json:"heldBy,omitempty"`
}

// streamLogVersion is the version in force a log stream records: the
// oldest version for a log that records none (one made before versions).
func streamLogVersion(sc jetstream.StreamConfig) (int, string) {
	v, err := strconv.Atoi(sc.Metadata[logVersionKey])
	if err != nil || v < 1 {
		return store.OldestLogVersion, ""
	}
	return v, sc.Metadata[logVersionReleaseKey]
}

// newLogMetadata is the version metadata of a log this release starts:
// no other release follows it yet, so it starts at the newest.
func (n *Node) newLogMetadata() map[string]string {
	return map[string]string{logVersionKey: strconv.Itoa(store.NewestLogVersion), logVersionReleaseKey: n.release()}
}

func (n *Node) release() string {
	if n.cfg.Release == "" {
		return "unknown"
	}
	return n.cfg.Release
}

// noteLogVersion takes the version in force from the stream's info.
func (n *Node) noteLogVersion(info *jetstream.StreamInfo) {
	v, by := streamLogVersion(info.Config)
	old := n.logVersion.Swap(int32(v))
	if old != 0 && int(old) != v {
		n.cfg.Logger.Info("the log version in force changed", "from", old, "to", v, "raised_by", by)
	}
	n.m.logVersion.Set(float64(v))
}

// writeVersion is the version this instance writes: the one in force, or
// the newest it has when a newer one is in force (it cannot apply those
// entries either, and stops on the first; until then it writes what it
// can).
func (n *Node) writeVersion() int {
	v := int(n.logVersion.Load())
	if v < store.OldestLogVersion {
		return store.OldestLogVersion
	}
	return min(v, store.NewestLogVersion)
}

// consumerMetadata says, on this instance's log consumer, what it reads.
func (n *Node) consumerMetadata() map[string]string {
	return map[string]string{consumerNodeKey: n.cfg.Node, consumerReleaseKey: n.release(), consumerReadsKey: ownVersions.String()}
}

// readers lists the instances that followed the log in the last
// memberFresh, from the members and the log's consumers.
func (n *Node) readers(ctx context.Context) ([]Reader, error) {
	now := time.Now()
	byNode := map[string]*Reader{}
	var out []*Reader
	ms, err := n.Members(ctx)
	if err != nil {
		return nil, err
	}
	for _, m := range ms {
		if now.Sub(m.SeenAt) > memberFresh {
			continue
		}
		r := &Reader{Node: m.Node, Release: m.Release, Reads: unannounced, SeenAt: m.SeenAt}
		if m.Reads != nil {
			r.Reads, r.Announced = *m.Reads, true
		}
		byNode[m.Node] = r
		out = append(out, r)
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	cl := n.stream.ListConsumers(ctx)
	for ci := range cl.Info() {
		if ci == nil || !consumerActive(ci, now) {
			continue
		}
		md := ci.Config.Metadata
		reads, ok := parseVersions(md[consumerReadsKey])
		if node := md[consumerNodeKey]; ok && node != "" {
			if r := byNode[node]; r != nil {
				r.Consumer = ci.Name
				if !r.Announced {
					r.Reads, r.Announced, r.Release = reads, true, md[consumerReleaseKey]
				}
				continue
			}
			r := &Reader{Node: node, Release: md[consumerReleaseKey], Reads: reads, Announced: true, Consumer: ci.Name, SeenAt: ci.Created}
			byNode[node] = r
			out = append(out, r)
			continue
		}
		out = append(out, &Reader{Reads: unannounced, Consumer: ci.Name, SeenAt: ci.Created})
	}
	if err := cl.Err(); err != nil {
		return nil, fmt.Errorf("consumers of %s: %w", n.cfg.LogStream, err)
	}
	rs := make([]Reader, len(out))
	for i, r := range out {
		rs[i] = *r
	}
	slices.SortFunc(rs, func(a, b Reader) int {
		return strings.Compare(a.Node+"\x00"+a.Consumer, b.Node+"\x00"+b.Consumer)
	})
	return rs, nil
}

// consumerActive: a consumer some program reads from now (a pull it has
// waiting, as a follower always has) or did in the last memberFresh. A
// stopped instance's consumer lingers on the server for minutes with no
// pull waiting; it stops counting memberFresh after its last delivery.
func consumerActive(ci *jetstream.ConsumerInfo, now time.Time) bool {
	if ci.NumWaiting > 0 || now.Sub(ci.Created) < memberFresh {
		return true
	}
	return ci.Delivered.Last != nil && now.Sub(*ci.Delivered.Last) < memberFresh
}

// heldBy lists the readers that do not read version.
func heldBy(rs []Reader, version int) []string {
	var out []string
	for _, r := range rs {
		if r.Reads.reads(version) {
			continue
		}
		who := r.Node
		if who == "" {
			who = "consumer " + r.Consumer + " (says nothing of what it reads: an orderd from before log versions, or another program)"
		} else if r.Release != "" {
			who += " on " + r.Release
		}
		out = append(out, fmt.Sprintf("%s (reads %s)", who, r.Reads))
	}
	return out
}

// maybeRaise raises the version in force, on the lease holder, when
// every recent reader reads a newer one.
func (n *Node) maybeRaise(ctx context.Context) {
	if !n.Leading() || n.Fatal() != nil {
		return
	}
	cur := n.writeVersion()
	if int(n.logVersion.Load()) >= store.NewestLogVersion {
		return
	}
	rs, err := n.readers(ctx)
	if err != nil {
		if ctx.Err() == nil {
			n.cfg.Logger.Debug("could not list the log's readers", "err", err)
		}
		return
	}
	next := store.NewestLogVersion
	if held := heldBy(rs, next); len(held) > 0 || len(rs) == 0 {
		return
	}
	info, err := n.streamInfo(ctx)
	if err != nil {
		return
	}
	if v, _ := streamLogVersion(info.Config); v >= next {
		n.noteLogVersion(info)
		return
	}
	if err := updateMetadata(ctx, n.js, info.Config, map[string]string{
		logVersionKey: strconv.Itoa(next), logVersionReleaseKey: n.release(),
	}); err != nil {
		if ctx.Err() == nil {
			n.cfg.Logger.Warn("could not raise the log version", "to", next, "err", err)
		}
		return
	}
	n.logVersion.Store(int32(next))
	n.m.logVersion.Set(float64(next))
	names := make([]string, 0, len(rs))
	for _, r := range rs {
		names = append(names, r.Node)
	}
	n.cfg.Logger.Info("raised the log version: every instance that follows the log reads it", "from", cur, "to", next, "readers", names)
}

// logVersionStatus is GET /v1/cluster's view of the log version.
func (n *Node) logVersionStatus(ctx context.Context, info *jetstream.StreamInfo) (LogVersionStatus, error) {
	st := LogVersionStatus{InForce: int(n.logVersion.Load()), Reads: ownVersions, Readers: []Reader{}}
	if info != nil {
		st.InForce, st.RaisedBy = streamLogVersion(info.Config)
	}
	rs, err := n.readers(ctx)
	if err != nil {
		return st, err
	}
	st.Readers = rs
	if st.InForce < store.NewestLogVersion {
		st.Next = store.NewestLogVersion
		st.HeldBy = heldBy(rs, st.Next)
	}
	return st, nil
}

// versionHint explains an entry this instance cannot decode because a
// newer release raised the log version.
func (n *Node) versionHint(ctx context.Context, err error) string {
	var ve *store.LogVersionError
	if !errors.As(err, &ve) {
		return ""
	}
	info, ierr := n.streamInfo(ctx)
	by := ""
	if ierr == nil {
		var v int
		v, by = streamLogVersion(info.Config)
		if v < int(ve.Version) {
			by = ""
		}
	}
	if by == "" {
		return fmt.Sprintf(" (upgrade this instance to a release that reads log version %d)", ve.Version)
	}
	return fmt.Sprintf(" (log version %d was raised by orderd %s: upgrade this instance to that release or later)", ve.Version, by)
}

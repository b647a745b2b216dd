package cluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"orderd/store"
)

// The log is verified, not trusted.
//
// Every instance hashes each entry it applies (entryHash: its sequence,
// message id, log id, link and bytes) and records the hash with the
// entry's effects, in the same transaction. Every entry this release
// appends carries a link (headerPrev): the sequence and hash of the last
// entry its appender had applied when it appended, so each entry commits
// to the log before it as its writer saw it, and its hash covers that
// link: a hash chain from the log's base. While one instance appends at a
// time the link names the entry just before; with several, an earlier
// one, which is as far as instances that append at once can know.
//
// An applier takes an entry only when its sequence follows the last it
// applied and its link matches the hash this instance recorded for the
// entry it names. Beside that, every few seconds, an instance re-reads
// the entry at its applied sequence and compares it with its hash, and
// compares the log's last sequence with its applied one. A gap, a link
// that does not match, an entry that changed or vanished, or a log that
// went back below what the instance applied stops the applier for good
// (a *VerifyError): it never skips an entry and never applies one that
// does not chain.

// headerPrev carries an entry's link: "<seq> <hex SHA-256>".
const headerPrev = "Orderd-Prev"

// entryHash is the hash an instance records for the entry at seq.
func entryHash(seq uint64, msgID, logID, prev string, data []byte) []byte {
	h := sha256.New()
	h.Write([]byte("orderd log entry 1\n"))
	h.Write(strconv.AppendUint(nil, seq, 10))
	for _, s := range []string{msgID, logID, prev} {
		h.Write([]byte{'\n'})
		h.Write([]byte(s))
	}
	h.Write([]byte{'\n'})
	h.Write(data)
	return h.Sum(nil)
}

// msgHash is entryHash of a message read from the log stream.
func msgHash(m *jetstream.RawStreamMsg) []byte {
	return entryHash(m.Sequence, m.Header.Get(jetstream.MsgIDHeader), m.Header.Get(headerLogID), m.Header.Get(headerPrev), m.Data)
}

// link is an entry's headerPrev: the entry it names before it.
type link struct {
	seq  uint64
	hash []byte
}

func (l link) String() string {
	if l.hash == nil {
		return ""
	}
	return strconv.FormatUint(l.seq, 10) + " " + hex.EncodeToString(l.hash)
}

// parseLink reads a headerPrev value; ok is false for none.
func parseLink(v string) (l link, ok bool, err error) {
	if v == "" {
		return link{}, false, nil
	}
	s, h, found := strings.Cut(v, " ")
	if !found {
		return link{}, false, fmt.Errorf("link %q: want <seq> <sha256>", v)
	}
	if l.seq, err = strconv.ParseUint(s, 10, 64); err != nil {
		return link{}, false, fmt.Errorf("link %q: %w", v, err)
	}
	if l.hash, err = hex.DecodeString(h); err != nil || len(l.hash) != sha256.Size {
		return link{}, false, fmt.Errorf("link %q: not a SHA-256", v)
	}
	return l, true, nil
}

// VerifyError is a log that is not the log this instance applied: the
// applier stops on it for good, and an instance refuses to start on it.
type VerifyError struct {
	// Stream is the log stream's name.
	Stream string
	// Seq is the sequence at which the check failed.
	Seq uint64
	// Applied is this instance's last applied sequence.
	Applied uint64
	// Problem says what did not match.
	Problem string
	// gap: entries are missing before Seq.
	gap bool
}

func (e *VerifyError) Error() string {
	return fmt.Sprintf("the log %s failed verification at sequence %d: %s; this instance applied up to %d and applies nothing more of this log. "+
		"Compare appliedSeq in GET /v1/cluster of every instance (members lists them): the instance with the highest applied sequence holds the most. "+
		"If the log lost entries an instance applied, stop every instance and start a new log from that instance's database (docs/replicated-mode.md, When the log is lost)",
		e.Stream, e.Seq, e.Problem, e.Applied)
}

// Is makes a VerifyError fatal for the applier, and a gap store.ErrLogGap.
func (e *VerifyError) Is(target error) bool {
	return target == errFatal || (e.gap && target == store.ErrLogGap)
}

// hashRing holds the hashes of the most recent applied entries, for the
// links of the entries that follow. Only the applier touches it.
type hashRing struct {
	seqs   []uint64
	hashes [][sha256.Size]byte
}

const ringSize = 1 << 14

func newHashRing() *hashRing {
	return &hashRing{seqs: make([]uint64, ringSize), hashes: make([][sha256.Size]byte, ringSize)}
}

func (r *hashRing) put(seq uint64, h []byte) {
	i := seq % ringSize
	r.seqs[i] = seq
	copy(r.hashes[i][:], h)
}

func (r *hashRing) get(seq uint64) ([]byte, bool) {
	i := seq % ringSize
	if seq == 0 || r.seqs[i] != seq {
		return nil, false
	}
	return r.hashes[i][:], true
}

// head is the last applied entry and its hash (nil when not recorded: an
// entry applied by a release before hashes, or none yet).
type head struct {
	seq  uint64
	hash []byte
}

// checkLink checks entry seq's link against what this instance applied;
// known gives the hash of an entry this instance applied, if it has it.
func checkLink(stream string, seq, applied uint64, prev string, known func(uint64) ([]byte, bool)) error {
	l, ok, err := parseLink(prev)
	switch {
	case err != nil:
		return &VerifyError{Stream: stream, Seq: seq, Applied: applied, Problem: "entry " + strconv.FormatUint(seq, 10) + " carries a malformed link: " + err.Error()}
	case !ok:
		// Appended by a release before links, or by an instance that
		// had applied nothing: the chain starts at the first link.
		return nil
	case l.seq >= seq:
		return &VerifyError{Stream: stream, Seq: seq, Applied: applied, Problem: fmt.Sprintf("entry %d links to entry %d, which is not before it", seq, l.seq)}
	}
	h, ok := known(l.seq)
	if !ok {
		// Older than the hashes this instance keeps, or applied before
		// it recorded hashes: nothing to compare with.
		return nil
	}
	if !bytes.Equal(h, l.hash) {
		return &VerifyError{Stream: stream, Seq: seq, Applied: applied,
			Problem: fmt.Sprintf("entry %d links to entry %d with hash %x, but the entry %d this instance applied has hash %x: the log its appender followed is not the log this instance applied",
				seq, l.seq, l.hash[:8], l.seq, h[:8])}
	}
	return nil
}

// checkHolds compares the log with what this instance applied: the log
// must reach its applied sequence and hold there the entry it applied
// (when its hash is recorded). It reads one entry.
func (n *Node) checkHolds(ctx context.Context, info *jetstream.StreamInfo, hd head) error {
	last, first := info.State.LastSeq, info.State.FirstSeq
	if hd.seq > last {
		return &VerifyError{Stream: n.cfg.LogStream, Seq: last, Applied: hd.seq,
			Problem: fmt.Sprintf("the log ends at %d, below entry %d which this instance applied: the log lost entries it had acknowledged, or it is another log", last, hd.seq)}
	}
	if hd.seq == 0 || hd.hash == nil || hd.seq < first {
		// Nothing applied, no hash recorded, or the entry aged out of
		// the log (cluster.log_max_age): nothing to re-read.
		return nil
	}
	gctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	m, err := n.stream.GetMsg(gctx, hd.seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		// Read again: the log may have aged it out just now.
		if info2, err2 := n.streamInfo(ctx); err2 == nil && info2.State.FirstSeq > hd.seq {
			return nil
		}
		return &VerifyError{Stream: n.cfg.LogStream, Seq: hd.seq, Applied: hd.seq,
			Problem: fmt.Sprintf("entry %d, which this instance applied, is gone from the log (which holds %d to %d): it was deleted or lost", hd.seq, first, last)}
	}
	if err != nil {
		return fmt.Errorf("read log entry %d: %w", hd.seq, err)
	}
	if got := msgHash(m); !bytes.Equal(got, hd.hash) {
		return &VerifyError{Stream: n.cfg.LogStream, Seq: hd.seq, Applied: hd.seq,
			Problem: fmt.Sprintf("the log's entry %d has hash %x, but the entry %d this instance applied has hash %x: the entry was replaced", hd.seq, got[:8], hd.seq, hd.hash[:8])}
	}
	return nil
}

// failVerify stops the applier for good on a failed verification.
func (n *Node) failVerify(err error) {
	if n.fatal.CompareAndSwap(nil, &err) {
		n.m.verifyFailures.Inc()
		n.cfg.Logger.Error("the log failed verification; this instance stops applying it, gives up the lease and is not ready", "err", err)
	}
}

// loadRing fills the ring with the hashes the database recorded for the
// entries before seq.
func (n *Node) loadRing(ctx context.Context, seq uint64) error {
	from := uint64(1)
	if seq > ringSize {
		from = seq - ringSize + 1
	}
	hs, err := n.store.EntryHashes(ctx, from)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	for s, h := range hs {
		n.ring.put(s, h)
	}
	return nil
}

// A comparison of the log with what this instance applied is believed
// only when it fails again and again for confirmWindow. The stream's
// state is read through whichever NATS server answers: a server cut off
// from the others, a replica catching up, or a leader that has not yet
// noticed it lost its quorum can answer with a log shorter than the one
// the quorum holds, and an instance must not refuse the real log for
// that. A log that really lost entries stays short (or keeps the wrong
// entry) after the cluster settles; a stale answer does not. Entries the
// applier receives are not affected: the log's consumer delivers only
// what a quorum committed.
type suspicion struct {
	since time.Time
	err   *VerifyError
}

// confirmWindow is how long a failed comparison must persist: two lease
// TTLs, well past a NATS server's step-down and a new leader's election.
func (n *Node) confirmWindow() time.Duration { return 2 * n.cfg.LeaseTTL }

// suspect records a failed comparison, and stops the applier once the
// comparisons have failed for confirmWindow.
func (n *Node) suspect(ve *VerifyError) {
	now := time.Now()
	s := n.suspicion.Load()
	if s == nil {
		n.suspicion.Store(&suspicion{since: now, err: ve})
		n.cfg.Logger.Warn("the log does not hold what this instance applied; checking again before refusing it", "err", ve, "confirm_within", n.confirmWindow())
		return
	}
	if now.Sub(s.since) >= n.confirmWindow() {
		n.failVerify(ve)
	}
}

// clearSuspicion forgets a failed comparison once one succeeds.
func (n *Node) clearSuspicion() {
	if s := n.suspicion.Swap(nil); s != nil {
		n.cfg.Logger.Info("the log holds what this instance applied after all", "first_seen", s.err.Problem)
	}
}

// checkHoldsConfirmed is checkHolds at start: a failure is read again
// until it has lasted confirmWindow before the start is refused.
func (n *Node) checkHoldsConfirmed(ctx context.Context, info *jetstream.StreamInfo, hd head) error {
	deadline := time.Now().Add(n.confirmWindow())
	for {
		err := n.checkHolds(ctx, info, hd)
		var ve *VerifyError
		if !errors.As(err, &ve) || time.Now().After(deadline) {
			return err
		}
		n.cfg.Logger.Warn("the log does not hold what this database applied; checking again before refusing it", "err", ve)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Second):
		}
		if info, err = n.streamInfo(ctx); err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
	}
}

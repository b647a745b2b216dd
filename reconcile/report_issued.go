package reconcile

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"orderd/store"
)

// A period that has ended keeps its digest, unless data inside it changed.
// To say which, the first report of an ended period records its digest
// (store.IssuedDigest) with a fingerprint of its order lines: the orders
// fall into issueBuckets groups by their id, and each group keeps the sum
// of its lines' hashes. A later report of the same period computes the
// same sums and compares: a group whose sum differs holds a line that
// changed, appeared or left. The orders it names are the lines of such
// groups whose order orderd learned something new about after the first
// report was made (a line is made from its order's stored state, so an
// unchanged order gives the same line); a differing group with no such
// order (a line that left the period) is counted as unnamed. The record is
// a few tens of KiB whatever the period's size, and the report's memory
// stays flat.

// issueBuckets is how many groups of orders the fingerprint keeps.
const issueBuckets = 4096

// issueSkew widens "changed since the first report" backwards: a webhook
// is stamped when it is received and committed a moment later, so one
// stamped just before the first report was made may not have been in it.
const issueSkew = time.Minute

// maxChangedNamed bounds the orders a report names as changed since the
// first issue; beyond it they are counted as unnamed.
const maxChangedNamed = 10000

// digestVersion names what a digest covers and how lines are
// fingerprinted: a first issue recorded under another version (an older
// orderd's definition) is not compared with.
func digestVersion() string {
	h := sha256.Sum256([]byte(DigestCovers + "\x00lines: sha256 of each line, summed per group of 4096 by order id"))
	return hex.EncodeToString(h[:8])
}

// DigestIssuer records the first digest issued for a period that has
// ended and returns the one that stands first. *store.Store satisfies it;
// a ReportStore that does not (or a read-only store) records nothing, and
// its reports say what the record it reads says.
type DigestIssuer interface {
	IssueDigest(ctx context.Context, d store.IssuedDigest) (store.IssuedDigest, error)
}

var _ DigestIssuer = (*store.Store)(nil)

// lineFingerprint is the per-group sums of a report's lines, and the
// lines whose orders changed after the first issue (candidates).
type lineFingerprint struct {
	sums  [issueBuckets]uint64
	lines int64
	// since is when the first issue was made, less issueSkew; zero when
	// there is none to compare with.
	since time.Time
	cands []changedLine
}

// changedLine names an order whose line changed since the first issue.
type changedLine struct {
	OrderID         string `json:"orderId"`
	MerchantOrderID string `json:"merchantOrderId"`
	bucket          uint16
}

func bucketOf(orderID string) uint16 {
	h := sha256.Sum256([]byte(orderID))
	return binary.BigEndian.Uint16(h[:2]) % issueBuckets
}

// add counts a line whose digest bytes are b.
func (f *lineFingerprint) add(l *Line, b []byte) {
	k := bucketOf(l.OrderID)
	h := sha256.Sum256(b)
	f.sums[k] += binary.BigEndian.Uint64(h[:8])
	f.lines++
	if f.since.IsZero() || l.changedAt.Before(f.since) {
		return
	}
	if len(f.cands) >= maxChangedNamed {
		return // its group, if it differs, counts as unnamed
	}
	f.cands = append(f.cands, changedLine{OrderID: l.OrderID, MerchantOrderID: l.MerchantOrderID, bucket: k})
}

// encode writes the non-empty groups: each its index (2 bytes) and sum (8
// bytes), big-endian.
func (f *lineFingerprint) encode() []byte {
	b := []byte{}
	for i, s := range f.sums {
		if s != 0 {
			b = binary.BigEndian.AppendUint16(b, uint16(i))
			b = binary.BigEndian.AppendUint64(b, s)
		}
	}
	return b
}

func decodeSums(b []byte) (*[issueBuckets]uint64, error) {
	if len(b)%10 != 0 {
		return nil, errors.New("line fingerprint: length is not a multiple of 10")
	}
	var sums [issueBuckets]uint64
	for ; len(b) > 0; b = b[10:] {
		i := binary.BigEndian.Uint16(b)
		if i >= issueBuckets {
			return nil, fmt.Errorf("line fingerprint: group %d out of range", i)
		}
		sums[i] = binary.BigEndian.Uint64(b[2:])
	}
	return &sums, nil
}

// FirstIssue is what a report of a period that has ended says about the
// first digest issued for it: the digest, when, and the orders whose
// lines changed since (none when the digest is the same).
type FirstIssue struct {
	Digest   string
	IssuedAt time.Time
	// Changed names the orders whose lines changed since, in the
	// report's line order.
	Changed []changedLine
	// Unnamed counts changes orderd cannot name: groups of lines that
	// differ with no order changed since in them (a line that left the
	// period), and orders beyond maxChangedNamed.
	Unnamed int
}

// firstIssue returns what the report says about the first issue of its
// period, recording this report as the first when none is: nil while the
// period has not ended, or when no first issue is recorded and this store
// records none.
func (rp *report) firstIssue(ctx context.Context, f *lineFingerprint, digest string) (*FirstIssue, error) {
	if rp.gen.Before(rp.p.To) {
		return nil, nil // the period has not ended: nothing is issued yet
	}
	first, ok := rp.issued, rp.hasIssued
	if !ok {
		issuer, can := rp.r.store.(DigestIssuer)
		if !can {
			return nil, nil
		}
		var err error
		first, err = issuer.IssueDigest(ctx, store.IssuedDigest{From: rp.p.From, To: rp.p.To, Version: digestVersion(),
			Digest: digest, IssuedAt: rp.gen, Lines: f.lines, Buckets: f.encode()})
		if errors.Is(err, store.ErrReadOnly) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
	}
	fi := &FirstIssue{Digest: first.Digest, IssuedAt: first.IssuedAt, Changed: []changedLine{}}
	if first.Digest == digest {
		return fi, nil
	}
	prev, err := decodeSums(first.Buckets)
	if err != nil {
		return nil, err
	}
	differ := map[uint16]bool{}
	for i := range prev {
		if prev[i] != f.sums[i] {
			differ[uint16(i)] = true
		}
	}
	named := map[uint16]bool{}
	for _, c := range f.cands {
		if differ[c.bucket] {
			fi.Changed = append(fi.Changed, c)
			named[c.bucket] = true
		}
	}
	for k := range differ {
		if !named[k] {
			fi.Unnamed++
		}
	}
	return fi, nil
}

// changedIDs returns the order ids of fi's changed lines.
func (fi *FirstIssue) changedIDs() []string {
	ids := make([]string, 0, len(fi.Changed))
	for _, c := range fi.Changed {
		ids = append(ids, c.OrderID)
	}
	return slices.Clip(ids)
}

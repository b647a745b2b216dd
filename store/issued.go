package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// IssuedDigest is the first digest a report gave for a period that had
// ended (see migration 0016): the period's bounds, the version of what
// the digest covers, the digest, when it was issued, how many order lines
// the report had and a fingerprint of those lines (Buckets, the report's
// own encoding) to tell later which lines changed.
type IssuedDigest struct {
	From, To time.Time
	Version  string
	Digest   string
	IssuedAt time.Time
	Lines    int64
	Buckets  []byte
}

// IssuedDigest returns the first digest issued for the period [from, to)
// under version, as the report's snapshot holds it; ok is false when none
// was.
// A database of an older schema read as it is (a read-only open does
// not migrate) has no record.
func (r *ReportTx) IssuedDigest(ctx context.Context, from, to time.Time, version string) (d IssuedDigest, ok bool, err error) {
	d, ok, err = issuedDigest(r.tx.QueryRowContext(ctx, issuedDigestQuery, from.UnixMilli(), to.UnixMilli(), version))
	if err != nil && strings.Contains(err.Error(), "no such table: issued_digests") {
		return IssuedDigest{}, false, nil
	}
	return d, ok, err
}

const issuedDigestQuery = `SELECT period_from, period_to, version, digest, issued_at, lines, buckets
	FROM issued_digests WHERE period_from = ? AND period_to = ? AND version = ?`

func issuedDigest(row *sql.Row) (IssuedDigest, bool, error) {
	var (
		d            IssuedDigest
		from, to, at int64
	)
	err := row.Scan(&from, &to, &d.Version, &d.Digest, &at, &d.Lines, &d.Buckets)
	if errors.Is(err, sql.ErrNoRows) {
		return IssuedDigest{}, false, nil
	}
	if err != nil {
		return IssuedDigest{}, false, fmt.Errorf("issued digest: %w", err)
	}
	d.From, d.To, d.IssuedAt = unixMilliUTC(from), unixMilliUTC(to), unixMilliUTC(at)
	return d, true, nil
}

// IssueDigest records d as the first digest issued for its period and
// version unless one is recorded already, and returns the one that stands
// first. It is a local write, never a log entry: the instance that made
// the report keeps the record (replicated mode's digest of the state
// leaves the table out). A read-only store answers ErrReadOnly.
func (s *Store) IssueDigest(ctx context.Context, d IssuedDigest) (IssuedDigest, error) {
	if d.Version == "" || d.Digest == "" || !d.From.Before(d.To) {
		return IssuedDigest{}, errors.New("issue digest: period, version and digest are required")
	}
	var first IssuedDigest
	err := s.write(ctx, func(tx *Tx) error {
		if _, err := tx.Exec(`INSERT INTO issued_digests (period_from, period_to, version, digest, issued_at, lines, buckets)
			VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
			d.From.UnixMilli(), d.To.UnixMilli(), d.Version, d.Digest, d.IssuedAt.UnixMilli(), d.Lines, d.Buckets); err != nil {
			return err
		}
		var (
			ok  bool
			err error
		)
		first, ok, err = issuedDigest(tx.QueryRow(issuedDigestQuery, d.From.UnixMilli(), d.To.UnixMilli(), d.Version))
		if err == nil && !ok {
			err = errors.New("not recorded")
		}
		return err
	}, false)
	if err != nil {
		return IssuedDigest{}, fmt.Errorf("issue digest of %s-%s: %w", d.From.Format(time.RFC3339), d.To.Format(time.RFC3339), err)
	}
	return first, nil
}

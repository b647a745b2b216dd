package store_test

import (
	"errors"
	"testing"
	"time"

	"orderd/store"
)

// The first digest issued for a period stays the first: a later one for
// the same period and version is not recorded, and each caller is told
// the first. Another period, or another version of what a digest covers,
// has a record of its own. The record is local: the replicated state's
// digest leaves it out. A read-only store records nothing.
func TestStore_IssueDigest(t *testing.T) {
	s, path := openStore(t, store.Options{})
	from := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	day := store.IssuedDigest{From: from, To: from.Add(24 * time.Hour), Version: "v1", Digest: "aaaa",
		IssuedAt: from.Add(25 * time.Hour), Lines: 3, Buckets: []byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 9}}
	before, _, err := s.Digest(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	first, err := s.IssueDigest(t.Context(), day)
	if err != nil || first.Digest != "aaaa" || !first.IssuedAt.Equal(day.IssuedAt) || first.Lines != 3 || len(first.Buckets) != 10 {
		t.Fatalf("first issue = %+v, %v", first, err)
	}
	later := day
	later.Digest, later.IssuedAt = "bbbb", day.IssuedAt.Add(time.Hour)
	if got, err := s.IssueDigest(t.Context(), later); err != nil || got.Digest != "aaaa" || !got.IssuedAt.Equal(day.IssuedAt) {
		t.Fatalf("a later issue of the same period = %+v, %v; want the first", got, err)
	}
	for _, other := range []store.IssuedDigest{
		{From: from, To: from.Add(12 * time.Hour), Version: "v1", Digest: "cccc", IssuedAt: later.IssuedAt, Buckets: []byte{}},
		{From: from, To: from.Add(24 * time.Hour), Version: "v2", Digest: "dddd", IssuedAt: later.IssuedAt, Buckets: []byte{}},
	} {
		if got, err := s.IssueDigest(t.Context(), other); err != nil || got.Digest != other.Digest {
			t.Errorf("issue of %s-%s %s = %+v, %v; want its own", other.From, other.To, other.Version, got, err)
		}
	}
	if after, _, err := s.Digest(t.Context()); err != nil || after != before {
		t.Errorf("issued digests changed the replicated state's digest: %s -> %s (%v)", before, after, err)
	}
	if _, err := s.IssueDigest(t.Context(), store.IssuedDigest{From: from, To: from, Version: "v1", Digest: "x"}); err == nil {
		t.Error("an empty period was recorded")
	}

	ro, err := store.Open(t.Context(), path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close(t.Context())
	other := day
	other.To = from.Add(48 * time.Hour)
	if _, err := ro.IssueDigest(t.Context(), other); !errors.Is(err, store.ErrReadOnly) {
		t.Errorf("read-only issue: %v, want ErrReadOnly", err)
	}
}

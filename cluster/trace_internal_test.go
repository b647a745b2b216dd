package cluster

import (
	"bytes"
	"testing"

	"orderd/store"
)

// TestEntryTraces: an entry's ops' traceparents go into one header and
// come back to the same ops; a header that does not name one value per op
// is ignored rather than given to the wrong ops.
func TestEntryTraces(t *testing.T) {
	const a = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	const b = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	ops := func() []store.Op {
		return []store.Op{{Cmd: store.NoopCmd{}}, {Cmd: store.NoopCmd{}}, {Cmd: store.NoopCmd{}}}
	}

	if got := entryTraces(ops()); got != "" {
		t.Errorf("untraced entry: header %q, want none", got)
	}
	traced := ops()
	traced[0].Trace, traced[2].Trace = a, b
	h := entryTraces(traced)
	if h != a+",,"+b {
		t.Errorf("header %q", h)
	}
	back := ops()
	setTraces(back, h)
	if back[0].Trace != a || back[1].Trace != "" || back[2].Trace != b {
		t.Errorf("traces read back: %q %q %q", back[0].Trace, back[1].Trace, back[2].Trace)
	}
	forged := ops()
	setTraces(forged, a+`"x`+",,"+b)
	if forged[0].Trace != "" || forged[2].Trace != b {
		t.Errorf("a part that is no traceparent was taken: %q, %q", forged[0].Trace, forged[2].Trace)
	}
	short := ops()[:2]
	setTraces(short, h)
	if short[0].Trace != "" || short[1].Trace != "" {
		t.Errorf("a header for 3 ops gave 2 ops traces %q %q", short[0].Trace, short[1].Trace)
	}
}

// TestEntryTraces_notHashed: the header is no part of an entry's hash, so
// the chain of links is the same whether its appender traced or not; the
// entry's bytes do not carry the traces either.
func TestEntryTraces_notHashed(t *testing.T) {
	plain := []store.Op{{Cmd: store.NoopCmd{}}}
	traced := []store.Op{{Cmd: store.NoopCmd{}, Trace: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
	pb, err := store.EncodeOps(plain)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := store.EncodeOps(traced)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(pb, tb) {
		t.Fatal("a traced op encodes to other bytes than an untraced one")
	}
	if !bytes.Equal(entryHash(7, "id", "log", "", pb), entryHash(7, "id", "log", "", tb)) {
		t.Fatal("hashes differ")
	}
}

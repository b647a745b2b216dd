package reconcile

import (
	"encoding/binary"
	"testing"
)

// TestStrSpecial8_everyByte: the eight-byte test finds a quote, a
// backslash or a control character at any place among any other bytes,
// and nothing among plain ones.
func TestStrSpecial8_everyByte(t *testing.T) {
	for c := range 256 {
		for pos := range 8 {
			for _, fill := range []byte{'a', 0x7f, 0x80, 0xff, ' ', '!', '#', '[', ']'} {
				var w [8]byte
				for i := range w {
					w[i] = fill
				}
				w[pos] = byte(c)
				want := c < 0x20 || c == '"' || c == '\\'
				if got := strSpecial8(binary.LittleEndian.Uint64(w[:])); got != want {
					t.Fatalf("byte %#x at %d among %#x: special %v, want %v", c, pos, fill, got, want)
				}
			}
		}
	}
}

package jsonenc_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"orderd/internal/jsonenc"
)

func check(t *testing.T, s string) {
	t.Helper()
	want, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	got := jsonenc.AppendString([]byte("prefix"), s)
	if !bytes.Equal(got[len("prefix"):], want) || string(got[:len("prefix")]) != "prefix" {
		t.Errorf("AppendString(%q) = %s, want %s", s, got[len("prefix"):], want)
	}
}

func TestAppendString(t *testing.T) {
	for _, s := range []string{
		"", "plain", `quote " and \ backslash`, "\b\f\n\r\t\x00\x01\x1f\x7f",
		"<script>&amp;</script>", "line\u2028para\u2029", "ünïcödé €", "bad \xff utf8 \xc3",
		"\xed\xa0\x80 surrogate", "emoji 😀", "a/b",
	} {
		check(t, s)
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "a\"b", "<>&", "\u2028", "\xff", "😀"} {
		f.Add(s)
	}
	f.Fuzz(check)
}

//go:build linux

package testaddr_test

import (
	"errors"
	"net"
	"syscall"
	"testing"

	"orderd/test/support/testaddr"
)

func TestLoopback(t *testing.T) {
	addr := testaddr.Loopback(t)

	// Nothing listens yet: a client is refused at once.
	if c, err := net.Dial("tcp", addr); !errors.Is(err, syscall.ECONNREFUSED) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("dial a reserved port with no server: %v, want connection refused", err)
	}

	// The kernel does not hand the port to anyone asking for a free one.
	var held []net.Listener
	defer func() {
		for _, ln := range held {
			ln.Close()
		}
	}()
	for range 2000 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		if ln.Addr().String() == addr {
			t.Fatalf("listen on :0 returned the reserved %s", addr)
		}
		held = append(held, ln)
		if len(held) > 100 {
			held[0].Close()
			held = held[1:]
		}
	}

	// A server binds it, stops and binds it again, as a restarted process
	// would; between the two nothing listens.
	for i := range 3 {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("server %d cannot listen on the reserved %s: %v", i, addr, err)
		}
		go func() {
			c, err := ln.Accept()
			if err == nil {
				c.Write([]byte("ok"))
				c.Close()
			}
		}()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial server %d: %v", i, err)
		}
		b := make([]byte, 2)
		if _, err := c.Read(b); err != nil || string(b) != "ok" {
			t.Errorf("server %d answered %q, %v", i, b, err)
		}
		c.Close()
		ln.Close()
		if _, err := net.Dial("tcp", addr); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("dial after server %d stopped: %v, want connection refused", i, err)
		}
	}
}

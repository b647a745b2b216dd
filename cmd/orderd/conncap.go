package main

import (
	"fmt"
	"syscall"
)

// Connection cap of the webhook listener. Every open connection holds a
// file descriptor; without a cap, one client opening connections without
// end takes every descriptor the process has, and the admin listener
// (/healthz included), the database and NATS stop with EMFILE.
const (
	// defaultMaxConnections is the cap when the descriptor limit is
	// generous: far more concurrent deliveries than a provider sends.
	defaultMaxConnections = 4096
	// fdReserve is how many descriptors are kept for everything but the
	// webhook listener: the admin listener, SQLite (a few per connection),
	// the embedded NATS server and its store, the provider client.
	fdReserve = 128
)

// webhookConnCap returns the webhook listener's connection cap for
// receiver.max_connections (0: automatic) under a descriptor limit of
// nofile, and a warning when a configured value had to be lowered. The
// automatic cap is half the limit, at most defaultMaxConnections; a
// configured one is kept unless it leaves fewer than fdReserve
// descriptors for the rest of orderd.
func webhookConnCap(configured int, nofile uint64) (int, string) {
	room := 1
	if nofile > fdReserve+1 {
		room = int(min(nofile-fdReserve, 1<<30))
	}
	if configured <= 0 {
		return max(1, min(defaultMaxConnections, int(min(nofile/2, 1<<30)))), ""
	}
	if configured > room {
		return room, fmt.Sprintf("receiver.max_connections %d leaves too few of the process's %d file descriptors "+
			"for the admin listener, the database and NATS; using %d (raise LimitNOFILE or lower the setting)",
			configured, nofile, room)
	}
	return configured, ""
}

// openFileLimit is the process's soft limit on open files (Go raises it to
// the hard limit at start-up).
func openFileLimit() uint64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 1024
	}
	return rl.Cur
}

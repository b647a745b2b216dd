package receiver

import (
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// limitListener accepts at most max connections at a time. When all are
// open, Accept waits for one to close: further clients wait in the
// kernel's listen queue, which costs the process no file descriptor, so one
// client opening connections without end cannot take the descriptors the
// admin listener, the database and NATS need.
type limitListener struct {
	net.Listener
	slots chan struct{}
	done  chan struct{}
	once  sync.Once
	max   int
	name  string
	log   *slog.Logger
	// lastFull is when the listener last logged that it is full (unix
	// nanoseconds), so a flood logs once a minute, not once a connection.
	lastFull atomic.Int64
}

func newLimitListener(ln net.Listener, max int, name string, log *slog.Logger) *limitListener {
	return &limitListener{Listener: ln, slots: make(chan struct{}, max), done: make(chan struct{}), max: max, name: name, log: log}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	default:
		l.full()
		select {
		case l.slots <- struct{}{}:
		case <-l.done:
			return nil, net.ErrClosed
		}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.slots }}, nil
}

// full logs, at most once a minute, that every connection slot is taken.
func (l *limitListener) full() {
	now := time.Now().UnixNano()
	last := l.lastFull.Load()
	if now-last < int64(time.Minute) || !l.lastFull.CompareAndSwap(last, now) {
		return
	}
	l.log.Warn(l.name+" listener has all its connections open; new ones wait",
		"max_connections", l.max, "addr", l.Addr().String())
}

func (l *limitListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitConn gives its slot back when it is closed, once.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// CloseWrite half-closes the connection when the underlying one can (TCP).
// net/http does that before closing a connection whose request it refused
// unread (431, 413), so the client reads the answer instead of a reset;
// embedding net.Conn alone would hide the method.
func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

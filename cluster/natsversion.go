package cluster

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
)

// MinServerVersion is the oldest nats-server replicated mode runs on: the
// first with stream metadata (2.10), where a log keeps its id and its base.
// On an older server the metadata is dropped without an error, and every
// check that rests on the log's id would be silently off.
const MinServerVersion = "2.10.0"

// ServerVersionError is the refusal of a nats-server older than
// MinServerVersion.
type ServerVersionError struct {
	// Server is the server's name, Version the version it announced.
	Server, Version string
}

func (e *ServerVersionError) Error() string {
	return fmt.Sprintf("the NATS server %s runs nats-server %s; replicated mode needs %s or newer (stream metadata holds the log's id and base): upgrade the NATS servers (docs/replicated-mode.md, What to deploy)",
		e.Server, e.Version, MinServerVersion)
}

// checkServerVersion refuses a connection to a server older than
// MinServerVersion.
func checkServerVersion(nc *nats.Conn) error {
	v := nc.ConnectedServerVersion()
	if !versionAtLeast(v, MinServerVersion) {
		return &ServerVersionError{Server: nc.ConnectedServerName(), Version: v}
	}
	return nil
}

// versionAtLeast compares two semantic versions' major, minor and patch
// numbers ("2.10.7-beta" counts as 2.10.7); a version it cannot read is
// not at least anything.
func versionAtLeast(v, min string) bool {
	a, okA := versionParts(v)
	b, okB := versionParts(min)
	if !okA || !okB {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return a[i] > b[i]
		}
	}
	return true
}

func versionParts(v string) ([3]int, bool) {
	var p [3]int
	v = strings.TrimPrefix(v, "v")
	if i := strings.IndexAny(v, "-+"); i >= 0 {
		v = v[:i]
	}
	fs := strings.Split(v, ".")
	if len(fs) != 3 {
		return p, false
	}
	for i, f := range fs {
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return p, false
		}
		p[i] = n
	}
	return p, true
}

//go:build chaos

package chaos_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"testing"
)

// binaries are the programs under test, built once per go test by TestMain.
var bins struct {
	orderd, provider, nats string
}

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if os.Geteuid() != 0 {
		// Namespaces, iptables and tc need root; CI runs as root.
		fmt.Fprintln(os.Stderr, "chaos: the suite needs root (network namespaces, iptables, tc)")
		return 1
	}
	dir, err := os.MkdirTemp("", "orderd-chaos-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	bins.orderd = filepath.Join(dir, "orderd")
	bins.provider = filepath.Join(dir, "providertest")
	bins.nats = filepath.Join(dir, "nats-server")
	start := time.Now()
	// nats-server is built from the version go.mod pins, as test/e2e
	// does: sync_interval (every write on disk before its ack) and the
	// stream metadata replicated mode uses need a newer server than some
	// distributions ship. CHAOS_NATS_SERVER names another nats-server
	// binary, and CHAOS_ORDERD another orderd (a release to compare, or
	// a branch not yet merged): the suite then runs those as they are.
	builds := []struct{ out, pkg string }{
		{bins.provider, "orderd/cmd/providertest"},
	}
	if p := os.Getenv("CHAOS_ORDERD"); p != "" {
		bins.orderd = p
	} else {
		builds = append(builds, struct{ out, pkg string }{bins.orderd, "orderd/cmd/orderd"})
	}
	if p := os.Getenv("CHAOS_NATS_SERVER"); p != "" {
		bins.nats = p
	} else {
		builds = append(builds, struct{ out, pkg string }{bins.nats, "github.com/nats-io/nats-server/v2"})
	}
	for _, b := range builds {
		out, err := exec.Command("go", "build", "-o", b.out, b.pkg).CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "chaos: go build %s: %v\n%s", b.pkg, err, out)
			return 1
		}
	}
	fmt.Fprintf(os.Stderr, "chaos: orderd %s, nats-server %s; built what was not given in %s\n", bins.orderd, bins.nats, time.Since(start).Round(time.Millisecond))
	return m.Run()
}

//go:build e2e

package e2e_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// binaries are the programs under test, built once per run by TestMain.
type binaries struct {
	orderd   string
	provider string
	nats     string
}

// bins is set by TestMain before any test runs and never changed after.
var bins binaries

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "orderd-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	start := time.Now()
	bins = binaries{
		orderd:   filepath.Join(dir, "orderd"),
		provider: filepath.Join(dir, "providertest"),
		nats:     filepath.Join(dir, "nats-server"),
	}
	// nats-server is built from the module version go.mod pins (the one
	// orderd embeds), because sync_interval, which makes every JetStream
	// write durable before its ack, needs a server newer than some
	// distributions ship.
	for _, b := range []struct{ out, pkg string }{
		{bins.orderd, "orderd/cmd/orderd"},
		{bins.provider, "orderd/cmd/providertest"},
		{bins.nats, "github.com/nats-io/nats-server/v2"},
	} {
		out, err := exec.Command("go", "build", "-o", b.out, b.pkg).CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "e2e: go build %s: %v\n%s", b.pkg, err, out)
			return 1
		}
	}
	fmt.Fprintf(os.Stderr, "e2e: built orderd, providertest and nats-server in %s\n", time.Since(start).Round(time.Millisecond))
	return m.Run()
}

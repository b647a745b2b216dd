package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestRun_ReplicatedCleanShutdown: a replicated instance that leads and is
// stopped cleanly logs its step down at info, not as a warning.
func TestRun_ReplicatedCleanShutdown(t *testing.T) {
	ec, fake := natsAndFake(t)
	dir := t.TempDir()
	cfg := daemonConfig(t, dir, fake, natsYAML(ec.ClientURL(), ""), clusterYAML("a", ""))
	r := startReplicaIn(t, dir, cfg, "a")
	waitLeading(t, r)
	r.stop(t)
	var stepped string
	for _, line := range strings.Split(r.log.String(), "\n") {
		if strings.Contains(line, "stepped down as leader") {
			stepped = line
		}
	}
	if !strings.Contains(stepped, `"level":"info"`) || !strings.Contains(stepped, "shutting down") {
		t.Fatalf("the clean shutdown logged %q, want the step down at info with the reason shutting down", stepped)
	}
}

// TestRun_ReplicatedRefusalSaysClusterOnce: a refusal of the cluster (a
// single-node database with records started in replicated mode) names the
// cluster once, not "cluster: cluster:".
func TestRun_ReplicatedRefusalSaysClusterOnce(t *testing.T) {
	ec, fake := natsAndFake(t)
	dir := t.TempDir()
	buildSingleNode(t, filepath.Join(dir, "orderd.db"), 0, 3)
	cfg := daemonConfig(t, dir, fake, natsYAML(ec.ClientURL(), ""), clusterYAML("a", ""))
	res := runOrderd(t, nil, nil, "run", "-config", cfg)
	if res.code != 1 || !strings.Contains(res.stderr, "cluster: the database at store.path holds records but follows no log") {
		t.Fatalf("run on a single-node database: exit %d, stderr %s; want 1 saying it follows no log", res.code, res.stderr)
	}
	if strings.Contains(res.stderr, "cluster: cluster:") {
		t.Fatalf("the refusal names the cluster twice: %s", res.stderr)
	}
}

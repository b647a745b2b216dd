package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"orderd/provider/providertest"
	"orderd/publish"
)

// BenchmarkCluster_Seed moves a single-node database of
// $ORDERD_SEED_ORDERS orders (default 2,000; make bench-seed uses
// 100,000) into replicated mode: it seeds the log, starts the seeded
// instance and an instance on an empty disk (which restores the seed's
// snapshot), and waits until both agree on the digest of every replicated
// table. The ceiling beside the seed is orderd backup of the same
// database (the VACUUM INTO a seed's snapshot starts with), measured in
// the same run. Run it with -benchtime 1x: each iteration needs a fresh
// cluster and database.
func BenchmarkCluster_Seed(b *testing.B) {
	orders := 2000
	if v := os.Getenv("ORDERD_SEED_ORDERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 100 {
			b.Fatalf("ORDERD_SEED_ORDERS=%q: want a number of orders, at least 100", v)
		}
		orders = n
	}
	for range b.N {
		b.StopTimer()
		ec, err := publish.StartEmbeddedCluster(publish.EmbeddedClusterConfig{Dir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		fake := providertest.NewServer(providertest.Options{})
		dirA := b.TempDir()
		dbA := filepath.Join(dirA, "orderd.db")
		start := time.Now()
		buildSingleNode(b, dbA, 0, orders)
		build := time.Since(start)
		fi, err := os.Stat(dbA)
		if err != nil {
			b.Fatal(err)
		}
		cfgA := daemonConfig(b, dirA, fake, natsYAML(ec.ClientURL(), ""), clusterYAML("a", ""))

		// The ceiling: a plain backup of the same database.
		start = time.Now()
		if res := runOrderd(b, nil, nil, "backup", "-config", cfgA, "-o", filepath.Join(b.TempDir(), "backup.db")); res.code != 0 {
			b.Fatalf("backup: %d %s", res.code, res.stderr)
		}
		backup := time.Since(start)

		b.StartTimer()
		start = time.Now()
		res := runOrderd(b, nil, nil, "cluster", "seed", "-config", cfgA)
		seed := time.Since(start)
		b.StopTimer()
		m := seededRE.FindStringSubmatch(res.stdout)
		if res.code != 0 || m == nil || m[3] != fmt.Sprint(orders) {
			b.Fatalf("seed: exit %d, stdout %q, stderr %s", res.code, res.stdout, res.stderr)
		}
		snapBytes, _ := strconv.ParseFloat(m[4], 64)

		a := startReplicaWithin(b, dirA, cfgA, "a", 5*time.Minute)
		dirB := b.TempDir()
		cfgB := daemonConfig(b, dirB, fake, natsYAML(ec.ClientURL(), ""), clusterYAML("b", ""))
		start = time.Now()
		bi := startReplicaWithin(b, dirB, cfgB, "b", 5*time.Minute)
		restore := time.Since(start)
		waitConvergedWithin(b, 5*time.Minute, a, bi)
		if n := tableCounts(b, filepath.Join(dirB, "orderd.db"))["orders"]; n != orders {
			b.Fatalf("the empty-disk instance has %d orders, want %d", n, orders)
		}
		a.stop(b)
		bi.stop(b)
		fake.Close()
		ec.Shutdown()

		b.ReportMetric(float64(orders), "orders")
		b.ReportMetric(build.Seconds(), "build_s")
		b.ReportMetric(float64(fi.Size())/float64(orders), "db_bytes/order")
		b.ReportMetric(snapBytes/1e6, "snapshot_MB")
		b.ReportMetric(seed.Seconds(), "seed_s")
		b.ReportMetric(backup.Seconds(), "backup_s")
		b.ReportMetric(restore.Seconds(), "empty_disk_start_s")
		b.ReportMetric(0, "ns/op")
	}
}

# The few targets a contributor types. "make test" is the test command of
# the README and of CI (.ci/run).

GO        ?= go
# The test targets build their binaries (and the orderd the tests start)
# without cmd/orderd/default.pgo: profile-guided optimisation changes how
# the compiler optimises, not what the code does, and building every
# package a second time with the profile (and again with -race) cost the
# test run minutes. make build, make deb and the benchmarks use it.
NOPGO     = GOFLAGS="$(strip $(GOFLAGS) -pgo=off)"
PKGS      ?= ./...
# Bound on each package's test binary; the whole suite stays well below.
TEST_TIMEOUT ?= 10m
# go test -bench duration per benchmark; keep it short on a 2-core machine.
BENCHTIME ?= 1s
# Highest acceptable "systemd-analyze security" exposure, times ten.
SECURITY_THRESHOLD ?= 20
STATICCHECK_VERSION := v0.8.2

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)

# Debian packages the tests and checks use, as PACKAGE:COMMAND: openssl for
# signature interop, nats-server and chromium for the end-to-end and HTML
# tests, systemd for systemd-analyze, wrk for make bench-daemon (and the
# test of its Lua script), prometheus for promtool (the alerting rules'
# unit tests).
DEBIAN_PACKAGES := openssl:openssl nats-server:nats-server chromium:chromium \
	systemd:systemd-analyze ca-certificates wrk:wrk prometheus:promtool

# make install: PREFIX for the binary and the docs; the unit goes where
# systemd reads it ($(PREFIX)/lib/systemd/system for /usr and /usr/local,
# else /etc/systemd/system; UNITDIR overrides). packaging/install.sh has
# the whole layout, which the Debian package shares with PREFIX=/usr.
PREFIX  ?= /usr/local
DESTDIR ?=
UNITDIR ?=

.PHONY: test deps fmt-check vet gotest systemd-verify lint staticcheck bench pgo \
	e2e sandbox build install deb clean load bench-daemon bench-cluster bench-seed bench-snapshot bench-scale bench-migrate vulncheck rules-test \
	node-deps asyncapi-check report-schema-check spectral-check consumers-check sandbox-soak chaos-net upgrade-test

## test: install missing Debian packages (as root with apt), check formatting,
## go vet, go test -race, verify the systemd unit against a built binary,
## and run the alerting rules' unit tests.
test: deps fmt-check vet gotest systemd-verify rules-test

deps:
	@.ci/install-deps $(DEBIAN_PACKAGES)

fmt-check:
	@out=$$(gofmt -l .); \
	if [ -n "$$out" ]; then echo "gofmt -l: these files need gofmt:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

gotest:
	$(NOPGO) $(GO) test -race -timeout $(TEST_TIMEOUT) $(PKGS)

systemd-verify: build
	@.ci/systemd-verify bin/orderd $(SECURITY_THRESHOLD)

## rules-test: promtool checks the alerting rules and runs their unit tests
## (monitoring/orderd.rules.test.yml). go test ./monitoring/ checks their
## metric names against a running orderd.
rules-test:
	cd monitoring && promtool check rules *.rules.yml && promtool test rules orderd.rules.test.yml

## node-deps: node and npm, for the AsyncAPI check and the Node consumer
## (from Debian when either is missing).
node-deps:
	@command -v node >/dev/null && command -v npm >/dev/null || .ci/install-deps nodejs:node npm:npm

## asyncapi-check: api/asyncapi.yaml validated by the AsyncAPI project's own
## parser (@asyncapi/parser, pinned by api/asyncapi-check/package-lock.json;
## install scripts are not run).
asyncapi-check: node-deps
	cd api/asyncapi-check && npm ci --no-audit --no-fund --ignore-scripts && node check.mjs ../asyncapi.yaml

## report-schema-check: api/report.schema.json compiled by Ajv (strict, draft
## 2020-12, formats asserted; pinned by api/report-schema-check/package-lock.json;
## install scripts are not run), the golden JSON reports of reconcile/testdata
## validated against it, and a report broken on purpose refused.
report-schema-check: node-deps
	cd api/report-schema-check && npm ci --no-audit --no-fund --ignore-scripts && \
		node check.mjs ../report.schema.json $(addprefix ../../,$(wildcard reconcile/testdata/*.json))

## spectral-check: api/openapi.json and api/asyncapi.yaml linted by Spectral
## with its OpenAPI and AsyncAPI rulesets (.spectral.yaml, which justifies
## each rule turned off), failing on any finding down to hints
## (@stoplight/spectral-cli, pinned by api/spectral-check/package-lock.json;
## install scripts are not run).
spectral-check: node-deps
	cd api/spectral-check && SCARF_ANALYTICS=false npm ci --no-audit --no-fund --ignore-scripts && \
		SCARF_ANALYTICS=false npx --no-install spectral lint --ruleset ../../.spectral.yaml --fail-severity hint ../openapi.json ../asyncapi.yaml

## consumers-check: the example consumers (examples/consumers/go and
## examples/consumers/node, npm ci from its lockfile) against "orderd
## sandbox", each crashed once midway and started again: every event handled
## exactly once, in order per order, each validated against its dataschema,
## and one that breaks its schema refused. Then the generated-client example
## (examples/client/node): its client generated from the current
## api/openapi.json and type-checked, a payin created through the gateway,
## its event awaited on NATS, the order read back (test/consumers; about
## three minutes, most of it npm ci).
consumers-check: node-deps
	$(GO) vet -tags consumers ./test/consumers/
	$(NOPGO) $(GO) test -tags consumers -race -count=1 -timeout 5m -v ./test/consumers/

## sandbox-soak: the sandbox's demo at 20 times its pace for the orders of an
## hour (1,800 steps), with give_up_after at 40s, then the reconciler left to
## finish: no finding, every order final, no creation in doubt (build tag
## integration; about five minutes). Without -race: the race detector slows
## each gateway call so much that the demo no longer keeps its pace (1,800
## steps took over six minutes under it), and make test runs the same code
## under the race detector.
sandbox-soak:
	$(GO) vet -tags integration ./cmd/orderd/
	$(NOPGO) $(GO) test -tags integration -count=1 -timeout 20m -run '^TestSandbox_demoStaysClean$$' -v ./cmd/orderd/

## lint: gofmt, go vet and staticcheck (pinned; built through the module proxy).
lint: fmt-check vet staticcheck

staticcheck:
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) $(PKGS)

## bench: every benchmark once for BENCHTIME, with allocations.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) $(PKGS)

## e2e: the fault suite (test/e2e) on the real binaries: orderd killed under
## load, NATS outages, provider faults, webhook retries, a full disk (tmpfs;
## needs root, else that test is skipped). -count=1: the suite builds the
## binaries itself, which go test's result cache cannot see.
e2e:
	$(GO) vet -tags e2e ./test/e2e/
	$(NOPGO) $(GO) test -tags e2e -race -count=1 -timeout 20m -v ./test/e2e/

## chaos-net: the network fault suite of replicated mode (test/chaos); needs
## root. Three nats-server nodes, two orderd instances and the fake provider,
## each in a network namespace of its own on a private bridge, under webhook
## load and gateway creations; partitions, loss and delay, flapping links,
## SIGSTOP, kill -9 and a minority's damaged stream files, one kind per run,
## then mixed runs drawn from the seed. Ends with one line: runs, acked, lost,
## duplicated, unleased provider calls, silent divergence; exits non-zero
## unless the last four are 0. CHAOS_RUNS runs of CHAOS_SECONDS each (the
## first runs take one fault kind each, the rest are mixed); CHAOS_SEED
## repeats a schedule (each run prints its own seed); CHAOS_FAULTS picks
## kinds (comma-separated names, or mixed; damaged-majority, a majority's
## damaged log files, runs only when named); CHAOS_LOGS=DIR keeps each run's
## process logs; CHAOS_ORDERD=FILE runs that orderd binary instead of a build
## of this tree.
CHAOS_RUNS    ?= 12
CHAOS_SECONDS ?= 60
CHAOS_SEED    ?=
CHAOS_FAULTS  ?=
chaos-net:
	@.ci/install-deps iproute2:ip iptables:iptables
	@$(NOPGO) GO=$(GO) CHAOS_RUNS=$(CHAOS_RUNS) CHAOS_SECONDS=$(CHAOS_SECONDS) CHAOS_SEED=$(CHAOS_SEED) \
		CHAOS_FAULTS=$(CHAOS_FAULTS) test/chaos/chaos-net.sh

## upgrade-test: the rolling upgrade (test/chaos, as root): two instances
## of the previous release under webhooks and gateway creations, upgraded
## one at a time to this tree, the upgraded lease holder killed while the
## other runs the previous release; the follower first, then the lease
## holder first. The previous release is built from this repository's
## history (UPGRADE_FROM=<commit>, default the last release before log
## version 3), or taken as a binary: UPGRADE_FROM_ORDERD=FILE.
UPGRADE_FROM        ?=
UPGRADE_FROM_ORDERD ?=
upgrade-test:
	@.ci/install-deps iproute2:ip iptables:iptables
	@$(GO) vet -tags chaos ./test/chaos/
	@UPGRADE_FROM=$(UPGRADE_FROM) UPGRADE_FROM_ORDERD=$(UPGRADE_FROM_ORDERD) \
		$(NOPGO) $(GO) test -tags chaos -count=1 -timeout 30m -v -run '^TestRollingUpgrade$$' ./test/chaos/

## load: build orderd and orderd-bench, start "orderd run" on loopback with a
## generated signing key, send 64 senders flat out for 10s beside the
## verify-only ceiling ("orderd-bench load -ceiling"), then 1,000 webhooks/s
## for 10s; print the summaries.
## Variables of cmd/orderd-bench/load.sh (FLAT_TIME, RATE, KEY_TYPE, ...) apply.
load:
	@GO=$(GO) cmd/orderd-bench/load.sh

## bench-daemon: the whole daemon ("orderd run", embedded NATS, log level
## warn, schedules off) against a verify-only ceiling, driven by wrk with a
## pre-signed corpus of distinct orders ("orderd-bench daemon"): interleaved
## rounds, best of each, throughput, p50/p99, errors, CPU per 1,000
## webhooks, peak and idle RSS. BENCH_FLAGS adds flags, e.g.
## BENCH_FLAGS='-rounds 3 -profile prof' or, against running instances,
## BENCH_FLAGS='-url http://a/webhooks/orders,http://b/webhooks/orders
## -key key.pem -admin http://a:8081,http://b:8081' (see BENCHMARKS.md).
BENCH_FLAGS ?=
bench-daemon: deps build
	$(GO) build -o bin/orderd-bench ./cmd/orderd-bench
	bin/orderd-bench daemon -orderd bin/orderd $(BENCH_FLAGS)

## bench-cluster: replicated mode under load on this machine — three
## nats-server nodes (R3, sync_interval always) and two orderd instances,
## driven together by "orderd-bench daemon" with 32 connections beside the
## verify-only ceiling and raw R3 publishes on the same cluster (32
## publishers sharing one connection, each waiting for its PubAck; the
## ratio to them is printed, and the CPU of every process per acked
## webhook against the NATS CPU per raw publish), and after each raw round
## the same traffic to NATS without orderd (the NATS nodes' floor per
## webhook; PATTERN=0 leaves it out). BEFORE=REV alternates
## REV's orderd and this tree's round by round, each round on a fresh
## cluster with its own raw reference, and compares them; SINGLE=0 leaves
## out single-node mode (cmd/orderd-bench/cluster.sh; CLUSTER_CONNS,
## CLUSTER_ROUNDS, CLUSTER_DURATION, CLUSTER_N, CLUSTER_PROFILE,
## CLUSTER_PROFILE_OF, NATS_PROFILE, PATTERN_FLAGS adjust it).
bench-cluster: deps
	@GO=$(GO) cmd/orderd-bench/cluster.sh

## bench-seed: orderd cluster seed of a single-node database of
## SEED_ORDERS orders (default 100,000, built through the store's write
## path), the seeded instance and an empty-disk instance started on the
## new log until both agree on every replicated table; orderd backup of the
## same database is the ceiling. The normal tests run the same code at
## 2,000 orders.
SEED_ORDERS ?= 100000
bench-seed:
	ORDERD_SEED_ORDERS=$(SEED_ORDERS) $(GO) test -run '^$$' -bench '^BenchmarkCluster_Seed$$' -benchtime 1x -timeout 60m ./cmd/orderd/

## bench-snapshot: snapshots on a database of SNAPSHOT_ORDERS orders (default
## 300,000, built through the store's write path) on three embedded NATS
## nodes (R3, fsync always): a whole-file snapshot and its restore beside the
## first chunked snapshot, the one after 1 % more orders, its restore onto an
## empty disk, and webhook p99 with and without a snapshot running.
SNAPSHOT_ORDERS ?= 300000
bench-snapshot:
	$(GO) test -run '^$$' -bench '^BenchmarkSnapshot$$' -benchtime 1x -timeout 60m ./cluster/ -args -snapshot.orders=$(SNAPSHOT_ORDERS)

## bench-scale: a database of SIZE orders (default 1,000,000) created over
## DAYS days (default 30), built through the store's write path (a
## processing and a final webhook per order, repeats, refunds, findings,
## balance snapshots), then the real daemon on it: bytes per order, start-up,
## each request a person opens (median of 5), the reports of the span and of
## its last day, backup and migrate ("orderd-bench scale"). SCALE_DIR keeps the
## database (and measures an existing one without rebuilding it); building
## 1,000,000 orders takes minutes and about 4 GB of disk. Then a busy day:
## BUSY_SIZE orders (default 300,000) arriving in the 5 minutes before, and
## as many byte-identical repeats, the same requests timed right after
## (BUSY_SIZE=0 skips it; SCALE_DIR keeps it in SCALE_DIR/busy).
SIZE      ?= 1000000
DAYS      ?= 30
SCALE_DIR ?=
BUSY_SIZE ?= 300000
bench-scale: build
	$(GO) build -o bin/orderd-bench ./cmd/orderd-bench
	bin/orderd-bench scale -orderd bin/orderd -size $(SIZE) -days $(DAYS) $(if $(SCALE_DIR),-dir $(SCALE_DIR))
	$(if $(filter-out 0,$(BUSY_SIZE)),bin/orderd-bench scale -orderd bin/orderd -scenario busy -size $(BUSY_SIZE) $(if $(SCALE_DIR),-dir $(SCALE_DIR)/busy))

## bench-migrate: an upgrade on a database of SIZE orders (built as for
## bench-scale, or the one kept in SCALE_DIR): every order's report columns
## left to the report_columns background migration, then the real daemon
## started on it: start-up to /readyz 200, webhook ingest while the
## migration runs and once it finished (the reference, same run), and how
## long the migration took ("orderd-bench scale -migration").
bench-migrate: build
	$(GO) build -o bin/orderd-bench ./cmd/orderd-bench
	bin/orderd-bench scale -orderd bin/orderd -size $(SIZE) -days $(DAYS) -migration $(if $(SCALE_DIR),-dir $(SCALE_DIR))

## vulncheck: govulncheck (pinned) against the Go vulnerability database
## built from the golang.org/x/vulndb module; see .ci/vulncheck.
vulncheck:
	@GO=$(GO) .ci/vulncheck

## sandbox: orderd on loopback with a fake provider and demo traffic. The
## built binary runs in make's place (exec), so Ctrl-C or kill -INT of its
## pid (the banner prints it) stops it cleanly; go run would swallow the
## signal. SANDBOX_FLAGS passes flags on (SANDBOX_FLAGS=-cluster).
sandbox: build
	exec bin/orderd sandbox $(SANDBOX_FLAGS)

## build: bin/orderd with the version and commit stamped in. Go builds it
## with cmd/orderd/default.pgo, a CPU profile of the daemon under webhooks
## (profile-guided optimisation; see "pgo" and BENCHMARKS.md).
build:
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/orderd ./cmd/orderd

## pgo: refresh cmd/orderd/default.pgo from this tree: a profile round of
## "orderd-bench daemon" (single-node, wrk, 64 connections) and, with
## PGO_CLUSTER=1, the lead instance of "make bench-cluster"'s profile
## round, merged. Commit the file with the change that made it stale;
## an old profile still helps (it matches functions, not lines), a
## missing one costs about a tenth of the CPU per webhook.
PGO_DIR ?= $(CURDIR)/.pgo
pgo: build
	rm -rf $(PGO_DIR) && mkdir -p $(PGO_DIR)
	$(GO) build -o bin/orderd-bench ./cmd/orderd-bench
	bin/orderd-bench daemon -orderd bin/orderd -profile $(PGO_DIR)/single -rounds 1 -rate 0 -idle 1s
	$(if $(filter 1,$(PGO_CLUSTER)),SINGLE=0 CLUSTER_ROUNDS=1 CLUSTER_PROFILE=$(PGO_DIR)/cluster CLUSTER_PROFILE_OF=leader GO=$(GO) cmd/orderd-bench/cluster.sh)
	$(GO) tool pprof -proto $(PGO_DIR)/single/cpu.pprof $(if $(filter 1,$(PGO_CLUSTER)),$(PGO_DIR)/cluster/cpu.pprof) > cmd/orderd/default.pgo
	rm -rf $(PGO_DIR)

## install: the binary, the systemd unit (ExecStart= naming $(PREFIX)/bin),
## the example config (config.yaml only when there is none), the docs and
## examples; then daemon-reload where systemd runs, and the next steps.
install: build
	@GO=$(GO) DESTDIR='$(DESTDIR)' PREFIX='$(PREFIX)' UNITDIR='$(UNITDIR)' packaging/install.sh bin/orderd

## deb: dist/orderd_<version>_<arch>.deb with dpkg-deb: the same layout
## under /usr, a static binary, maintainer scripts in packaging/deb/.
deb:
	@GO=$(GO) VERSION='$(VERSION)' COMMIT='$(COMMIT)' packaging/build-deb.sh

clean:
	rm -rf bin dist

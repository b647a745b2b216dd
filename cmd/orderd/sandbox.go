package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/shopspring/decimal"

	"orderd/provider"
	"orderd/provider/providertest"
)

// sandboxDir is where the sandbox keeps its database, NATS store, keys and
// generated config, relative to the working directory.
const sandboxDir = "orderd-sandbox"

func sandboxCommand() command {
	return command{
		Name:    "sandbox",
		Summary: "run everything on loopback with a fake provider and demo traffic",
		Help: "Starts the built-in fake provider, orderd with an embedded NATS server and a database in\n" +
			"./" + sandboxDir + "/, and demo traffic: orders created through the gateway, completed,\n" +
			"rejected, repeated, delivered late and out of order, one left in doubt, one the webhooks miss.\n" +
			"By default it takes ports 8080 (webhooks), 8081 (admin API), 4222 (NATS) and 8090 (fake\n" +
			"provider), each replaced by a free port when taken, and prints where everything listens.\n" +
			"-listen-base N takes N, N+1, N+2 and N+3 instead; -webhooks, -admin, -nats and -provider\n" +
			"name one address each (port 0: any free one). A port chosen by a flag is used or the start\n" +
			"fails: it is never silently replaced. These flags are for the single-node sandbox.\n" +
			"The fake provider keeps its books in " + sandboxStateFile + " beside the database, so a restart\n" +
			"carries on with the same orders, stream and balances; remove the directory to start afresh.\n" +
			"With -cluster: replicated mode instead, a three-node NATS cluster and two orderd instances\n" +
			"(child processes) behind one webhook address, to kill one and watch the other take over.",
		Setup: func(fs *flag.FlagSet) func(context.Context, *env) error {
			dir := fs.String("dir", sandboxDir, "`DIR` for the database, NATS store, keys and config")
			demo := fs.Bool("demo", true, "generate demo traffic")
			every := fs.Duration("every", 2*time.Second, "pause between demo orders")
			replicated := fs.Bool("cluster", false, "replicated mode: 3 NATS nodes and 2 orderd instances, in cluster/ under -dir (wiped at each start)")
			base := fs.Int("listen-base", 0, "take ports `N` (webhooks), N+1 (admin API), N+2 (NATS) and N+3 (fake provider) on 127.0.0.1")
			var ports sandboxPorts
			fs.StringVar(&ports.receiver, "webhooks", "", "`ADDR` of the webhook listener (default 127.0.0.1:8080, or a free port when taken)")
			fs.StringVar(&ports.admin, "admin", "", "`ADDR` of the admin API (default 127.0.0.1:8081, or a free port when taken)")
			fs.StringVar(&ports.nats, "nats", "", "`ADDR` of the embedded NATS server (default 127.0.0.1:4222, or a free port when taken)")
			fs.StringVar(&ports.provider, "provider", "", "`ADDR` of the fake provider (default 127.0.0.1:8090, or a free port when taken)")
			return func(ctx context.Context, e *env) error {
				if err := noArgs(e); err != nil {
					return err
				}
				if *every <= 0 {
					return e.usagef("-every must be positive")
				}
				chosen, err := ports.resolve(*base)
				if err != nil {
					return e.usagef("%v", err)
				}
				if *replicated {
					if chosen != (sandboxPorts{}) {
						return e.usagef("-listen-base, -webhooks, -admin, -nats and -provider apply to the single-node sandbox, not to -cluster")
					}
					return runSandboxCluster(ctx, e, *dir, *demo, *every)
				}
				return runSandbox(ctx, e, sandboxOptions{dir: *dir, demo: *demo, every: *every, ports: chosen})
			}
		},
	}
}

// The sandbox's preferred addresses; any free port is used instead of one
// that is taken.
const (
	sandboxReceiver = "127.0.0.1:8080"
	sandboxAdmin    = "127.0.0.1:8081"
	sandboxNATS     = "127.0.0.1:4222"
	sandboxProvider = "127.0.0.1:8090"
	anyLoopbackPort = "127.0.0.1:0"
)

// sandboxPorts are the addresses chosen by the sandbox's flags; an empty
// one means the preferred address above, or any free port when it is
// taken.
type sandboxPorts struct {
	receiver, admin, nats, provider string
}

// resolve checks the addresses given and fills in those -listen-base
// implies (base 0: none). An address named by its own flag wins over the
// base.
func (p sandboxPorts) resolve(base int) (sandboxPorts, error) {
	if base != 0 {
		if base < 1 || base > 65535-3 {
			return p, fmt.Errorf("-listen-base %d: want a port from 1 to 65532 (it takes that port and the three after it)", base)
		}
		for i, a := range []*string{&p.receiver, &p.admin, &p.nats, &p.provider} {
			if *a == "" {
				*a = net.JoinHostPort("127.0.0.1", strconv.Itoa(base+i))
			}
		}
	}
	for _, f := range []struct{ flag, addr string }{
		{"-webhooks", p.receiver}, {"-admin", p.admin}, {"-nats", p.nats}, {"-provider", p.provider},
	} {
		if f.addr == "" {
			continue
		}
		_, port, err := net.SplitHostPort(f.addr)
		if err != nil {
			return p, fmt.Errorf("%s %q: want HOST:PORT, e.g. 127.0.0.1:9080", f.flag, f.addr)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			return p, fmt.Errorf("%s %q: the port is not a number from 0 to 65535", f.flag, f.addr)
		}
	}
	return p, nil
}

// sandboxStateFile is where the fake provider keeps its books, beside the
// database, so that a restarted sandbox finds the provider as it left it.
const sandboxStateFile = "provider-state.json"

// sandboxOptions are the knobs of one single-node sandbox. The command
// sets dir, demo and every from its flags; a test also replaces the
// reconcile section and bounds the demo, to live through an hour of demo
// traffic in a few minutes.
type sandboxOptions struct {
	dir   string
	demo  bool
	every time.Duration
	// reconcileYAML replaces sandboxReconcileYAML when set.
	reconcileYAML string
	// steps, when positive, ends the demo traffic after that many steps;
	// the sandbox runs on, so the reconciler finishes what the demo left.
	steps int
	// ports holds the addresses chosen by flags; each must be bound.
	ports sandboxPorts
}

func runSandbox(ctx context.Context, e *env, o sandboxOptions) error {
	dir, demo, every := o.dir, o.demo, o.every
	reconcileYAML := o.reconcileYAML
	if reconcileYAML == "" {
		reconcileYAML = sandboxReconcileYAML
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("sandbox dir: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	// A database left by a sandbox that did not keep the provider's books
	// (an older version) describes orders the fake no longer has.
	stateFile := filepath.Join(abs, sandboxStateFile)
	_, dbErr := os.Stat(filepath.Join(abs, "orderd.db"))
	_, stateErr := os.Stat(stateFile)
	orphanDB := dbErr == nil && errors.Is(stateErr, fs.ErrNotExist)

	opts := sandboxProviderOptions()
	opts.Listen = cmp.Or(o.ports.provider, sandboxProvider)
	opts.StateFile = stateFile
	fake, err := providertest.Start(opts)
	if err != nil && isAddrInUse(err) && o.ports.provider == "" {
		opts.Listen = anyLoopbackPort
		fake, err = providertest.Start(opts)
	}
	if err != nil {
		return fmt.Errorf("fake provider on %s: %w", opts.Listen, err)
	}
	defer fake.Close()

	// The listeners are bound here and handed to the daemon, so the
	// addresses written into the config are the ones it serves on.
	recvLn, err := listenSandbox("webhooks", o.ports.receiver, sandboxReceiver)
	if err != nil {
		return err
	}
	defer recvLn.Close()
	adminLn, err := listenSandbox("admin API", o.ports.admin, sandboxAdmin)
	if err != nil {
		return err
	}
	defer adminLn.Close()
	recvAddr, adminAddr := recvLn.Addr().String(), adminLn.Addr().String()
	publicURL := "http://" + recvAddr + "/webhooks/orders"
	// Orders kept from an earlier run name that run's receiver; their
	// webhooks go to this one.
	fake.SetWebhookURLOverride(publicURL)

	// The embedded NATS server binds its port itself: when the preferred
	// one is taken, start again on any free port.
	natsListen := cmp.Or(o.ports.nats, sandboxNATS)
	for {
		cfgPath, err := writeSandboxConfig(abs, fake, recvAddr, adminAddr, natsListen, publicURL, reconcileYAML)
		if err != nil {
			return err
		}
		e.ConfigPath = cfgPath
		cfg, err := e.LoadConfig()
		if err != nil {
			return err
		}
		lg, err := e.NewLogging(cfg.Log)
		if err != nil {
			return err
		}
		err = serve(ctx, e, cfg, lg, daemonOptions{receiverLn: recvLn, adminLn: adminLn, logRoutine: true}, func(ctx context.Context, d *daemon) error {
			if bound := strings.TrimPrefix(d.natsURL, "nats://"); bound != natsListen {
				// The config names the port NATS really took, so that
				// "orderd tail -config" finds it.
				if _, err := writeSandboxConfig(abs, fake, recvAddr, adminAddr, bound, publicURL, reconcileYAML); err != nil {
					return err
				}
			}
			printSandbox(e.Stdout, d, fake, cfgPath, orphanDB)
			if !demo {
				<-ctx.Done()
				return nil
			}
			if !fake.Restored() && d.rec != nil {
				// The provider's balance before the first demo order:
				// today's report then has an opening balance, and its
				// verdict a bridge, instead of "incomplete".
				if _, err := d.rec.RunBalances(ctx); err != nil && ctx.Err() == nil {
					lg.Logger.Warn("opening balance snapshot", "err", err)
				}
			}
			g := &demoTraffic{
				admin:    "http://" + d.admin.Addr(),
				fake:     fake,
				log:      lg.Logger.With("component", "demo"),
				every:    every,
				client:   &http.Client{Timeout: 30 * time.Second},
				restored: fake.Restored(),
				steps:    o.steps,
			}
			g.run(ctx)
			// A bounded demo ends before the sandbox does.
			<-ctx.Done()
			return nil
		})
		if o.ports.nats == "" && natsListen != anyLoopbackPort && isAddrInUse(err) && strings.Contains(err.Error(), "nats.embedded") {
			natsListen = anyLoopbackPort
			continue
		}
		return err
	}
}

// listenSandbox binds the address a flag chose, or else the preferred one
// (any free port when that is taken).
func listenSandbox(what, chosen, preferred string) (net.Listener, error) {
	if chosen == "" {
		return listenPreferred(preferred)
	}
	ln, err := net.Listen("tcp", chosen)
	if err != nil {
		return nil, fmt.Errorf("%s on %s: %w", what, chosen, err)
	}
	return ln, nil
}

// listenPreferred binds want, or any free loopback port when want is taken.
func listenPreferred(want string) (net.Listener, error) {
	ln, err := net.Listen("tcp", want)
	if err == nil {
		return ln, nil
	}
	if ln, err2 := net.Listen("tcp", anyLoopbackPort); err2 == nil {
		return ln, nil
	}
	return nil, err
}

// isAddrInUse reports an error from binding a port that is taken. The
// embedded NATS server reports it as text, so the text is what is checked.
func isAddrInUse(err error) bool {
	return err != nil && (errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use"))
}

// sandboxReconcileYAML is the sandbox's reconcile section, for one
// instance or each of a cluster: jobs often enough to watch them work.
const sandboxReconcileYAML = `reconcile:
  stale_after: 15s
  doubt_min_age: 10s
  give_up_after: 10m
  schedules:
    stale: "@every 10s"
    doubt: "@every 10s"
    balances: "@every 30s"
    requisites: "@every 30s"
    report: "@every 5m"
`

// writeSandboxConfig writes the fake provider's public key, API key and a
// config file, so that "orderd tail|reconcile|report -config" work on the
// running sandbox as they would on a real deployment.
func writeSandboxConfig(dir string, fake *providertest.Server, recv, admin, nats, publicURL, reconcileYAML string) (string, error) {
	keyFile := filepath.Join(dir, "provider-public.pem")
	apiKeyFile := filepath.Join(dir, "provider-api-key")
	if err := os.WriteFile(keyFile, fake.PublicKeyPEM(), 0o600); err != nil {
		return "", err
	}
	if err := os.WriteFile(apiKeyFile, []byte(fake.APIKey()+"\n"), 0o600); err != nil {
		return "", err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `# Written by "orderd sandbox"; rewritten at every start.
provider:
  base_url: %q
  api_key_file: %q
  public_keys: [%q]
  timeout: 5s
  rate_limit: 50
  rate_burst: 5
receiver:
  listen: %q
  public_url: %q
admin:
  listen: %q
store:
  path: %q
nats:
  embedded:
    listen: %q
    store_dir: %q
    max_store: 256MiB
%sreports:
  dir: %q
log:
  level: info
`, fake.URL(), apiKeyFile, keyFile, recv, publicURL, admin,
		filepath.Join(dir, "orderd.db"), nats, filepath.Join(dir, "nats"), reconcileYAML, filepath.Join(dir, "reports"))
	path := filepath.Join(dir, "config.yaml")
	return path, os.WriteFile(path, b.Bytes(), 0o600)
}

// selfCommand is how the banner spells this program: "go run ./cmd/orderd"
// when it was started that way (its binary is in Go's build cache), else
// the name it was started by.
func selfCommand() string {
	exe, err := os.Executable()
	if err != nil || strings.Contains(exe, "go-build") {
		return "go run ./cmd/orderd"
	}
	if p, err := exec.LookPath(filepath.Base(exe)); err == nil && p == exe {
		return filepath.Base(exe)
	}
	return exe
}

func printSandbox(w io.Writer, d *daemon, fake *providertest.Server, cfgPath string, orphanDB bool) {
	self := selfCommand()
	dir := filepath.Dir(cfgPath)
	fmt.Fprintf(w, `orderd sandbox is running (pid %d). Ctrl-C or kill -INT %d stops it.

  fake provider   %s  (API key %q)
  webhooks        http://%s%s
  admin API       http://%s   (dashboard: http://%s/ , health: /healthz, metrics: /metrics)
  NATS            %s   (stream %s, subjects %s.>)
  database        %s
  config          %s

Watch the events:
  %s tail -config %s
  (or, with the nats CLI if you have it: nats sub '%s.>' --server %s)
  Their contract (AsyncAPI): curl -s http://%s/v1/asyncapi.yaml
  Example consumers: examples/consumers/go and examples/consumers/node

Look up an order:  curl -s http://%s/v1/orders/<merchantOrderId>
Run the reconciler now:  %s reconcile -config %s
Report for today:  %s report -config %s -from %s -to %s -format html -o report.html

`, os.Getpid(), os.Getpid(), fake.URL(), fake.APIKey(), d.recvSrv.Addr(), d.cfg.Receiver.Path, d.admin.Addr(), d.admin.Addr(),
		d.natsURL, d.cfg.NATS.Stream, d.cfg.NATS.SubjectPrefix, d.cfg.Store.Path, cfgPath,
		self, cfgPath, d.cfg.NATS.SubjectPrefix, d.natsURL, d.admin.Addr(),
		d.admin.Addr(), self, cfgPath, self, cfgPath,
		time.Now().UTC().Format(time.DateOnly), time.Now().UTC().AddDate(0, 0, 1).Format(time.DateOnly))
	fmt.Fprint(w, sandboxFaults(true, fake.URL(), fake.APIKey()))
	if fake.Restored() {
		fmt.Fprintf(w, `Restarted: the database, the NATS stream and the fake provider's books
(%s) are as the last run left them; webhooks that were still
being retried and the demo's pending steps were lost (the reconciler polls
the orders they were about). Remove %s to start from scratch.

`, sandboxStateFile, dir)
	} else {
		fmt.Fprintf(w, `Everything is kept in %s: stopped and started again, the sandbox
carries on with the same orders, stream and provider balances. Remove the
directory to start from scratch.

`, dir)
	}
	if orphanDB {
		fmt.Fprintf(w, `Note: the database in %s was left by a sandbox that did not keep the
provider's books, so the fake provider no longer knows its orders: expect
balance_drift findings and ORDER_NOT_FOUND polls for them. Remove the
directory to start clean.

`, dir)
	}
}

// sandboxFaults is the banner's list of what the sandbox does wrong on
// purpose, so that the warnings and findings it causes read as the demo
// they are, not as a broken install. fakeURL and apiKey fill in the
// command that moves money with no order behind it. routineAtInfo:
// accepted and repeated webhooks are logged at info (the single-node
// sandbox), not only the stale ones.
func sandboxFaults(routineAtInfo bool, fakeURL, apiKey string) string {
	logged := `The receiver logs the late older
    states at info as "outcome":"stale"; they change nothing.`
	if routineAtInfo {
		logged = `Each is logged at info:
    "outcome":"accepted" changed the order, "duplicate" was a repeat,
    "stale" an older state arriving late; neither of the last two changes
    anything.`
	}
	return `On purpose, to show how orderd copes (none of this is a fault of orderd):
  - The fake provider sends webhooks late (up to 10s), about a third of
    them twice, and the state before each final one after it. ` + logged + `
  - One creation in eight through the gateway is made at the provider but
    answered 500: a WARN "gateway creation in doubt ... unexpected HTTP
    status 500", the answer is in_doubt, and the doubt job settles it within
    about 20s. The order exists at the provider all the same, and its payer
    pays it like any other.
  - One order in eight is created with no webhook at all; orderd watches it
    because the demo asks it to, and the stale job's poll learns its end.
  - Late webhooks are timing, not missing money: a balance check that does
    not add up asks the provider about the orders that could explain it,
    and no balance_drift finding opens for them. To see one, move money
    with no order behind it (the fake's control API, with its API key):
      curl -H 'Authorization: ` + apiKey + `' -d '{"currency":"brl","delta":"-12.34"}' ` + fakeURL + `/_control/adjust-balance
    After reconcile.drift_grace balance checks (about a minute) a
    balance_drift finding of exactly -12.34 opens (red on the dashboard),
    as it would for money really missing; work it from the dashboard.

`
}

// demoTraffic drives the sandbox the way a merchant platform and its
// customers would, so that every path of orderd shows up in the events.
type demoTraffic struct {
	admin  string
	fake   *providertest.Server
	log    *slog.Logger
	every  time.Duration
	client *http.Client
	// restored: the fake carries on from an earlier run's books.
	restored bool
	// steps, when positive, is how many steps run takes before it stops.
	steps int
	n     int

	// mu guards done: the steps that complete payins run in their own
	// goroutines (later), while step picks refund candidates from it.
	mu   sync.Mutex
	done []string // completed payins, candidates for refunds
}

func (g *demoTraffic) run(ctx context.Context) {
	if g.restored {
		// The earlier run's pending steps died with it: the payers of
		// its orders still open pay now.
		for _, o := range g.fake.Orders() {
			if o.Status == provider.StatusProcessing && strings.HasPrefix(o.MerchantOrderID, "demo-") {
				_ = g.fake.Complete(o.MerchantOrderID)
			}
		}
	}
	// The fake keeps faithful books: every balance movement has an order
	// behind it, so the balances job explains every drift it meets (by
	// asking the provider when a webhook is late) and raises no
	// balance_drift finding. The banner says how to move money with no
	// order behind it, to see one.
	t := time.NewTicker(g.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := g.step(ctx); err != nil && ctx.Err() == nil {
			g.log.Warn("demo step failed", "err", err)
		}
		if g.steps > 0 && g.n >= g.steps {
			g.log.Info("demo traffic done", "steps", g.n)
			return
		}
	}
}

// step runs one scenario; they rotate so a few minutes show them all.
func (g *demoTraffic) step(ctx context.Context) error {
	g.n++
	id := fmt.Sprintf("demo-%d-%04d", time.Now().Unix()%100000, g.n)
	amount := fmt.Sprintf("%d.%02d", 10+rand.IntN(490), rand.IntN(100))
	currency := "brl"
	if g.n%5 == 0 {
		currency = "mxn"
	}
	switch g.n % 8 {
	case 0, 1, 2, 5:
		// Created through the gateway, paid a moment later: the webhook
		// (sometimes twice, and followed by a late older state) completes it.
		if err := g.payin(ctx, id, amount, currency); err != nil {
			return err
		}
		g.payLater(ctx, id)
	case 3:
		if err := g.payin(ctx, id, amount, currency); err != nil {
			return err
		}
		g.later(ctx, 3*time.Second, func() error { return g.fake.Reject(id, "payer did not pay") })
	case 4:
		// Created by the platform itself with no webhook: orderd follows it
		// because the platform asked it to watch, and the stale job's poll
		// learns the completion.
		if _, err := g.fake.CreateOrder(providertest.NewOrder{MerchantOrderID: id, Amount: amount, Currency: currency}); err != nil {
			return err
		}
		if _, err := g.post(ctx, "/v1/watch", map[string]any{"merchantOrderId": id, "type": "payin", "state": "created"}); err != nil {
			return err
		}
		g.later(ctx, 2*time.Second, func() error { return g.fake.Complete(id) })
	case 6:
		// The provider creates the order but answers 500: the gateway
		// answers in_doubt and the doubt job settles it as created.
		_ = g.fake.InjectFault(providertest.Fault{Endpoint: providertest.PathPaymentCreate, Kind: providertest.FailAfter})
		g.log.Info("demo: the provider answers this creation 500 on purpose, after making it; the gateway answers in_doubt and the doubt job settles it", "merchant_order_id", id)
		if err := g.payin(ctx, id, amount, currency); err != nil {
			return err
		}
		// The order exists at the provider whatever the gateway was
		// told, and its payer pays it like any other: the provider
		// finishes it and its webhook reaches orderd. Left processing,
		// it would be polled until reconcile.give_up_after and then
		// become a stuck_order finding the demo did not mean to raise.
		g.payLater(ctx, id)
	case 7:
		orig, ok := g.refundCandidate()
		if !ok {
			return nil
		}
		o, ok := g.fake.Order(orig)
		if !ok || o.Status != provider.StatusCompleted || len(o.Transactions) == 0 || o.Transactions[0].Authorized == nil {
			return nil
		}
		half := o.Transactions[0].Authorized.Amount.Div(decimal.NewFromInt(2)).Round(2)
		_, err := g.post(ctx, "/v1/refunds", map[string]any{
			"merchantOrderId": orig, "id": o.ID, "amount": provider.FormatAmount(half), "refundReason": "demo partial refund",
		})
		if err != nil {
			return err
		}
		// The provider processes the refund a moment later and it
		// completes, so the reports' refunds are not all still in flight.
		// The spec does not say whether a refund sends a webhook (the fake
		// sends none), so orderd learns of it by asking: the balance
		// check that finds the refunded money gone polls the order.
		g.later(ctx, 4*time.Second, func() error {
			cur, ok := g.fake.Order(orig)
			if !ok {
				return nil
			}
			for _, t := range cur.Transactions {
				if t.Type == "refund" && !t.Status.IsFinal() {
					if err := g.fake.CompleteRefund(orig, t.ID, true); err != nil {
						return err
					}
				}
			}
			return nil
		})
		return nil
	}
	return nil
}

// payLater has the payer of payin id pay it a moment after its creation,
// and makes it a candidate for a refund once the provider completed it.
func (g *demoTraffic) payLater(ctx context.Context, id string) {
	g.later(ctx, 3*time.Second, func() error {
		if err := g.fake.Complete(id); err != nil {
			return err
		}
		g.mu.Lock()
		g.done = append(g.done, id)
		g.mu.Unlock()
		return nil
	})
}

// refundCandidate picks a completed payin of the demo at random.
func (g *demoTraffic) refundCandidate() (string, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.done) == 0 {
		return "", false
	}
	return g.done[rand.IntN(len(g.done))], true
}

func (g *demoTraffic) payin(ctx context.Context, id, amount, currency string) error {
	_, err := g.post(ctx, "/v1/payins", map[string]any{
		"merchantOrderId": id,
		"invoice":         map[string]string{"amount": amount, "currency": currency},
		"client":          map[string]any{"name": "Demo Customer"},
	})
	return err
}

func (g *demoTraffic) later(ctx context.Context, d time.Duration, fn func() error) {
	go func() {
		select {
		case <-ctx.Done():
		case <-time.After(d):
			if err := fn(); err != nil && ctx.Err() == nil {
				g.log.Warn("demo step failed", "err", err)
			}
		}
	}()
}

func (g *demoTraffic) post(ctx context.Context, path string, body any) (int, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.admin+path, bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := g.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	g.log.Info("demo request", "path", path, "status", resp.StatusCode)
	if resp.StatusCode >= 400 {
		return resp.StatusCode, errors.New(path + ": " + resp.Status + ": " + strings.TrimSpace(string(msg)))
	}
	return resp.StatusCode, nil
}

// sandboxProviderOptions is the fake provider both sandboxes run: webhooks
// late, repeated and out of order, as the real one may send them, with
// balances to reconcile and the control API for the demo.
func sandboxProviderOptions() providertest.Options {
	return providertest.Options{
		WebhookBaseDelay:  500 * time.Millisecond,
		MaxWebhookDelay:   10 * time.Second,
		DuplicateWebhooks: 0.3,
		OutOfOrder:        true,
		InitialBalances:   map[string]string{"brl": "10000.00", "mxn": "50000.00"},
		ControlAPI:        true,
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
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
			"Uses the default ports where free, else free ones, and prints where everything listens.",
		Setup: func(fs *flag.FlagSet) func(context.Context, *env) error {
			dir := fs.String("dir", sandboxDir, "`DIR` for the database, NATS store, keys and config")
			demo := fs.Bool("demo", true, "generate demo traffic")
			every := fs.Duration("every", 2*time.Second, "pause between demo orders")
			return func(ctx context.Context, e *env) error {
				if err := noArgs(e); err != nil {
					return err
				}
				if *every <= 0 {
					return e.usagef("-every must be positive")
				}
				return runSandbox(ctx, e, *dir, *demo, *every)
			}
		},
	}
}

func runSandbox(ctx context.Context, e *env, dir string, demo bool, every time.Duration) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("sandbox dir: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	recvAddr := pickAddr("127.0.0.1:8080")
	adminAddr := pickAddr("127.0.0.1:8081")
	natsAddr := pickAddr("127.0.0.1:4222")
	publicURL := "http://" + recvAddr + "/webhooks/orders"

	fake, err := providertest.Start(providertest.Options{
		Listen:            pickAddr("127.0.0.1:8090"),
		WebhookBaseDelay:  500 * time.Millisecond,
		MaxWebhookDelay:   10 * time.Second,
		DuplicateWebhooks: 0.3,
		OutOfOrder:        true,
		InitialBalances:   map[string]string{"brl": "10000.00", "mxn": "50000.00"},
		ControlAPI:        true,
	})
	if err != nil {
		return fmt.Errorf("fake provider: %w", err)
	}
	defer fake.Close()

	cfgPath, err := writeSandboxConfig(abs, fake, recvAddr, adminAddr, natsAddr, publicURL)
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
	return serve(ctx, e, cfg, lg, daemonOptions{}, func(ctx context.Context, d *daemon) error {
		printSandbox(e.Stdout, d, fake, cfgPath, abs)
		if !demo {
			<-ctx.Done()
			return nil
		}
		g := &demoTraffic{
			admin:  "http://" + d.admin.Addr(),
			fake:   fake,
			log:    lg.Logger.With("component", "demo"),
			every:  every,
			client: &http.Client{Timeout: 30 * time.Second},
		}
		g.run(ctx)
		return nil
	})
}

// pickAddr returns want when it can be bound now, else a free loopback port.
func pickAddr(want string) string {
	if ln, err := net.Listen("tcp", want); err == nil {
		ln.Close()
		return want
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return want
	}
	defer ln.Close()
	return ln.Addr().String()
}

// writeSandboxConfig writes the fake provider's public key, API key and a
// config file, so that "orderd tail|reconcile|report -config" work on the
// running sandbox as they would on a real deployment.
func writeSandboxConfig(dir string, fake *providertest.Server, recv, admin, nats, publicURL string) (string, error) {
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
reconcile:
  stale_after: 15s
  doubt_min_age: 10s
  give_up_after: 10m
  schedules:
    stale: "@every 10s"
    doubt: "@every 10s"
    balances: "@every 30s"
    requisites: "@every 30s"
    report: "@every 5m"
reports:
  dir: %q
log:
  level: info
`, fake.URL(), apiKeyFile, keyFile, recv, publicURL, admin,
		filepath.Join(dir, "orderd.db"), nats, filepath.Join(dir, "nats"), filepath.Join(dir, "reports"))
	path := filepath.Join(dir, "config.yaml")
	return path, os.WriteFile(path, b.Bytes(), 0o600)
}

func printSandbox(w io.Writer, d *daemon, fake *providertest.Server, cfgPath, dir string) {
	fmt.Fprintf(w, `orderd sandbox is running. Ctrl-C stops it.

  fake provider   %s  (API key %q)
  webhooks        http://%s%s
  admin API       http://%s   (dashboard: http://%s/ , health: /healthz, metrics: /metrics)
  NATS            %s   (stream %s, subjects %s.>)
  database        %s
  config          %s

Watch the events:
  go run ./cmd/orderd tail -server %s
  nats sub '%s.>' --server %s

Look up an order:  curl -s http://%s/v1/orders/<merchantOrderId>
Run the reconciler now:  go run ./cmd/orderd reconcile -config %s
Report for today:  go run ./cmd/orderd report -config %s -from %s -to %s -format html -o report.html

`, fake.URL(), fake.APIKey(), d.recvSrv.Addr(), d.cfg.Receiver.Path, d.admin.Addr(), d.admin.Addr(),
		d.natsURL, d.cfg.NATS.Stream, d.cfg.NATS.SubjectPrefix, d.cfg.Store.Path, cfgPath,
		d.natsURL, d.cfg.NATS.SubjectPrefix, d.natsURL, d.admin.Addr(), cfgPath, cfgPath,
		time.Now().UTC().Format(time.DateOnly), time.Now().UTC().AddDate(0, 0, 1).Format(time.DateOnly))
	_ = dir
}

// demoTraffic drives the sandbox the way a merchant platform and its
// customers would, so that every path of orderd shows up in the events.
type demoTraffic struct {
	admin  string
	fake   *providertest.Server
	log    *slog.Logger
	every  time.Duration
	client *http.Client
	n      int
	done   []string // completed payins, candidates for refunds
}

func (g *demoTraffic) run(ctx context.Context) {
	// One balance movement with no order behind it, so the balance job
	// has a drift to find and explain as unexplained.
	_ = g.fake.AdjustBalance("brl", "-12.34")
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
		g.later(ctx, 3*time.Second, func() error {
			g.done = append(g.done, id)
			return g.fake.Complete(id)
		})
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
		if err := g.payin(ctx, id, amount, currency); err != nil {
			return err
		}
	case 7:
		if len(g.done) == 0 {
			return nil
		}
		orig := g.done[rand.IntN(len(g.done))]
		o, ok := g.fake.Order(orig)
		if !ok || o.Status != provider.StatusCompleted || len(o.Transactions) == 0 || o.Transactions[0].Authorized == nil {
			return nil
		}
		half := o.Transactions[0].Authorized.Amount.Div(decimal.NewFromInt(2)).Round(2)
		_, err := g.post(ctx, "/v1/refunds", map[string]any{
			"merchantOrderId": orig, "id": o.ID, "amount": provider.FormatAmount(half), "refundReason": "demo partial refund",
		})
		return err
	}
	return nil
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

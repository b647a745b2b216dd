// Command providertest runs the fake payment provider of package
// provider/providertest as a process of its own, for end-to-end suites and
// manual trials. It serves the provider API and the test controls under
// /_control/ on -listen, writes the webhook public key to -pubkey, and
// prints, once it is ready:
//
//	PROVIDER_URL=http://127.0.0.1:41234
//	PROVIDER_API_KEY=test-api-key
//
// It stops on SIGINT or SIGTERM. Exit status: 0 after a clean stop, 1 on a
// runtime failure, 2 on a usage error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"orderd/provider/providertest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// usageError marks errors in the command line; they exit with status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	if errors.Is(err, flag.ErrHelp) {
		return 2
	}
	fmt.Fprintln(stderr, "providertest:", err)
	var u usageError
	if errors.As(err, &u) {
		return 2
	}
	return 1
}

// balancesFlag collects repeated -balance currency=amount flags.
type balancesFlag map[string]string

func (b balancesFlag) String() string {
	parts := make([]string, 0, len(b))
	for k, v := range b {
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, ",")
}

func (b balancesFlag) Set(s string) error {
	ccy, amount, ok := strings.Cut(s, "=")
	if !ok || ccy == "" || amount == "" {
		return fmt.Errorf("want currency=amount, got %q", s)
	}
	b[ccy] = amount
	return nil
}

// run parses args, starts the fake and serves until ctx ends.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("providertest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		o        providertest.Options
		pubkey   = fs.String("pubkey", "", "write the webhook public key (PEM) to this `file`")
		logLevel = fs.String("log-level", "info", "log level: debug, info, warn or error")
		balances = balancesFlag{}
	)
	fs.StringVar(&o.Listen, "listen", "127.0.0.1:0", "`address` to listen on")
	fs.StringVar(&o.APIKey, "api-key", "test-api-key", "API key the Authorization header must carry")
	fs.StringVar(&o.KeyType, "key-type", "rsa", "webhook signing key: rsa or ecdsa")
	fs.DurationVar(&o.WebhookBaseDelay, "webhook-base-delay", time.Second, "wait before the first webhook retry; each further retry doubles it")
	fs.DurationVar(&o.MaxWebhookDelay, "max-webhook-delay", 0, "cap on the doubling retry delay (0: none)")
	fs.IntVar(&o.MaxWebhookRetries, "max-webhook-retries", 20, "webhook retries after the first attempt (0: none)")
	fs.DurationVar(&o.WebhookTimeout, "webhook-timeout", 3*time.Second, "timeout of one webhook attempt")
	fs.Float64Var(&o.DuplicateWebhooks, "duplicate-webhooks", 0, "probability (0-1) that a webhook is delivered twice")
	fs.BoolVar(&o.OutOfOrder, "out-of-order", false, "after each final webhook, also deliver the older processing state")
	fs.BoolVar(&o.RefundWebhooks, "refund-webhooks", false, "send the order again when a refund reaches a final status")
	fs.StringVar(&o.MinAmount, "min-amount", "", "smallest payin or payout amount (AMOUNT_LESS_THAN_ALLOWED)")
	fs.StringVar(&o.MaxAmount, "max-amount", "", "largest payin or payout amount (AMOUNT_GREATER_THAN_ALLOWED)")
	fs.StringVar(&o.FeePercent, "fee-percent", "2", "fee on payins, in percent")
	fs.StringVar(&o.RequisiteMinAmount, "requisite-min-amount", "10.00", "minAmount of new requisites")
	fs.DurationVar(&o.AutoComplete, "auto-complete", 0, "complete orders and refunds this long after creation (0: never)")
	fs.Uint64Var(&o.Seed, "seed", 0, "seed for ids and random choices (0: random)")
	fs.Var(balances, "balance", "initial balance as `currency=amount` (repeatable)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return usageError{fmt.Sprintf("-log-level: %v", err)}
	}
	if o.DuplicateWebhooks < 0 || o.DuplicateWebhooks > 1 {
		return usageError{"-duplicate-webhooks: must be between 0 and 1"}
	}
	if o.MaxWebhookRetries == 0 {
		o.MaxWebhookRetries = -1 // the flag's 0 means none; Options' 0 means the default
	}
	o.InitialBalances = balances
	o.ControlAPI = true
	o.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	s, err := providertest.Start(o)
	if err != nil {
		if strings.HasPrefix(err.Error(), "options:") {
			return usageError{err.Error()}
		}
		return err
	}
	defer s.Close()
	if *pubkey != "" {
		if err := os.WriteFile(*pubkey, s.PublicKeyPEM(), 0o644); err != nil {
			return fmt.Errorf("write public key: %w", err)
		}
	}
	if _, err := fmt.Fprintf(stdout, "PROVIDER_URL=%s\nPROVIDER_API_KEY=%s\n", s.URL(), s.APIKey()); err != nil {
		return fmt.Errorf("write address: %w", err)
	}
	o.Logger.Info("fake provider ready", "url", s.URL())
	<-ctx.Done()
	o.Logger.Info("stopping")
	return nil
}

package load

import (
	"context"
	"crypto"
	"flag"
	"fmt"
	"io"
	"math"
	"net/url"
	"time"

	"orderd/cmd/orderd-bench/internal/cli"
)

// Bounds that keep every run finite.
const (
	// maxRunTime ends a run that has no -d, whatever -n says.
	maxRunTime = 10 * time.Minute
	// defaultPresign is how many distinct bodies a -flat run bounded only
	// by -d signs up front.
	defaultPresign = 100_000
	// maxBodies bounds the corpus, so a mistyped -n cannot eat the memory.
	maxBodies = 5_000_000
)

// options are the parsed command line.
type options struct {
	url       string
	ceiling   bool
	keyFile   string
	genKeyOut string
	keyType   string
	rate      float64
	flat      bool
	conc      int
	total     int
	duration  time.Duration
	repeat    float64
	timeout   time.Duration
	presign   int
	rounds    int
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("orderd-bench load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.url, "url", "", "webhook `URL` of the receiver, e.g. http://127.0.0.1:8080/webhooks/orders")
	fs.BoolVar(&o.ceiling, "ceiling", false, "also measure a verify-only server in this process (run before -url)")
	fs.StringVar(&o.keyFile, "key", "", "private key `file` (PEM: PKCS #8, PKCS #1 or SEC 1) to sign with")
	fs.StringVar(&o.genKeyOut, "gen-key-out", "", "write a fresh private key to `file` and its public key to file.pub")
	fs.StringVar(&o.keyType, "key-type", "ecdsa", "kind of key -gen-key-out makes: ecdsa (P-256) or rsa (2048 bits)")
	fs.Float64Var(&o.rate, "rate", 0, "send `N` webhooks per second (open loop)")
	fs.BoolVar(&o.flat, "flat", false, "send as fast as the receiver answers")
	fs.IntVar(&o.conc, "c", 64, "concurrent senders, each with its own keep-alive connection")
	fs.IntVar(&o.total, "n", 0, "send at most `N` webhooks")
	fs.DurationVar(&o.duration, "d", 0, "send for at most this `duration`")
	fs.Float64Var(&o.repeat, "repeat", 0, "`fraction` of requests that resend an acknowledged body (0 to 1)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "bound on one request")
	fs.IntVar(&o.presign, "presign", defaultPresign, "distinct bodies to sign up front when only -d bounds a -flat run")
	fs.IntVar(&o.rounds, "rounds", 4, "with -url and -ceiling, alternate the two in this many rounds")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, cli.Usagef("unexpected argument %q", fs.Arg(0))
	}
	return o, o.validate()
}

func (o *options) validate() error {
	sending := o.url != "" || o.ceiling
	if !sending {
		if o.genKeyOut == "" {
			return cli.Usagef("nothing to do: give -url and/or -ceiling, or -gen-key-out")
		}
		return nil
	}
	if o.url != "" {
		u, err := url.Parse(o.url)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return cli.Usagef("-url %q is not an http(s) URL", o.url)
		}
	}
	switch {
	case o.keyFile == "" && o.genKeyOut == "":
		return cli.Usagef("-key is required (or -gen-key-out to make one)")
	case o.keyFile != "" && o.genKeyOut != "":
		return cli.Usagef("give -key or -gen-key-out, not both")
	case o.flat == (o.rate > 0):
		return cli.Usagef("give exactly one of -flat and -rate N")
	case o.rate < 0 || math.IsNaN(o.rate) || math.IsInf(o.rate, 0):
		return cli.Usagef("-rate must be a positive number")
	case o.conc < 1 || o.conc > 10_000:
		return cli.Usagef("-c must be between 1 and 10000")
	case o.total < 0 || o.total > maxBodies:
		return cli.Usagef("-n must be between 1 and %d", maxBodies)
	case o.duration < 0:
		return cli.Usagef("-d must not be negative")
	case o.total == 0 && o.duration == 0:
		return cli.Usagef("bound the run with -n and/or -d")
	case !(o.repeat >= 0 && o.repeat < 1):
		return cli.Usagef("-repeat must be at least 0 and below 1")
	case o.timeout <= 0:
		return cli.Usagef("-timeout must be positive")
	case o.presign < 1 || o.presign > maxBodies:
		return cli.Usagef("-presign must be between 1 and %d", maxBodies)
	case o.rounds < 1 || o.rounds > 100:
		return cli.Usagef("-rounds must be between 1 and 100")
	}
	if o.rate > 0 && o.total == 0 && o.rate*o.duration.Seconds() > maxBodies {
		return cli.Usagef("-rate × -d is more than %d webhooks; bound it with -n", maxBodies)
	}
	return nil
}

// plan is how many requests a run may send and how many distinct bodies
// it signs for them.
func (o *options) plan() (requests, distinct int) {
	switch {
	case o.total > 0:
		requests = o.total
	case o.rate > 0:
		requests = int(math.Ceil(o.rate * o.duration.Seconds()))
	default:
		requests = o.presign
	}
	// Repeats are spread evenly; the first senders find nothing
	// acknowledged to repeat yet, so a few more fresh bodies are kept.
	distinct = min(requests, requests-int(float64(requests)*o.repeat)+o.conc)
	return max(requests, 1), max(distinct, 1)
}

// run parses args, prepares the key and the signed bodies, and measures
// each target in turn.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	var key crypto.Signer
	if o.genKeyOut != "" {
		pub, err := generateKeyFiles(o.genKeyOut, o.keyType)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "orderd-bench load: wrote %s and %s\n", o.genKeyOut, pub)
		if o.url == "" && !o.ceiling {
			return nil
		}
		key, err = loadKey(o.genKeyOut)
		if err != nil {
			return err
		}
	} else {
		key, err = loadKey(o.keyFile)
		if err != nil {
			return err
		}
	}

	requests, distinct := o.plan()
	start := time.Now()
	c, err := newCorpus(ctx, key, distinct)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "orderd-bench load: signed %d distinct webhooks in %s\n", distinct, time.Since(start).Round(time.Millisecond))

	cfg := loadConfig{
		rate:     o.rate,
		conc:     o.conc,
		requests: requests,
		duration: o.duration,
		repeat:   o.repeat,
		timeout:  o.timeout,
	}
	if cfg.duration == 0 {
		cfg.duration = maxRunTime
	}

	var targets []*target
	names := map[*target]string{}
	if o.ceiling {
		srv, err := startCeiling(key.Public())
		if err != nil {
			return err
		}
		defer srv.Close()
		tg := newTarget(srv.URL(), c, cfg)
		targets, names[tg] = append(targets, tg), "ceiling"
	}
	if o.url != "" {
		tg := newTarget(o.url, c, cfg)
		targets, names[tg] = append(targets, tg), "orderd"
	}
	// With two targets the phases alternate in rounds, so a change in the
	// machine's background load during the run touches both alike.
	rounds := 1
	if len(targets) > 1 {
		rounds = o.rounds
	}
	for r := range rounds {
		n := requests/rounds + boolInt(r < requests%rounds)
		d := cfg.duration / time.Duration(rounds)
		for _, tg := range targets {
			if err := tg.round(ctx, n, d); err != nil {
				return err
			}
		}
	}
	results := map[string]*result{}
	for _, tg := range targets {
		tg.close()
		res := tg.result()
		results[names[tg]] = res
		fmt.Fprintln(stdout, res.summary(names[tg], cfg))
		reportFirstError(stderr, names[tg], res)
	}
	if ceil, tgt := results["ceiling"], results["orderd"]; ceil != nil && tgt != nil && ceil.rate() > 0 {
		fmt.Fprintf(stdout, "ratio=%.3f\n", tgt.rate()/ceil.rate())
	}
	return ctx.Err()
}

// reportFirstError names the first failure of a phase, so a run full of
// errors says why.
func reportFirstError(stderr io.Writer, target string, r *result) {
	if r.firstErr != nil {
		fmt.Fprintf(stderr, "orderd-bench load: %s: first failure: %v\n", target, r.firstErr)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

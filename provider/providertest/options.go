package providertest

import (
	"crypto"
	"log/slog"
	"net/http"
	"time"
)

// Options configures a Server. The zero value works: every field has a
// default that suits a unit test.
type Options struct {
	// APIKey is the value the Authorization header must carry.
	// Default "test-api-key".
	APIKey string

	// KeyType is the kind of webhook signing key to generate: "rsa"
	// (default, 2048 bits) or "ecdsa" (P-256). Ignored when Key is set.
	KeyType string
	// Key, when set, is used to sign webhooks instead of a generated key.
	// Generating an RSA key takes a noticeable fraction of a second, so
	// suites that start many servers can generate one with GenerateKey and
	// share it.
	Key crypto.Signer

	// WebhookBaseDelay is the wait before the first retry of a webhook;
	// each further retry waits double the previous one. Default 1s; tests
	// use milliseconds.
	WebhookBaseDelay time.Duration
	// MaxWebhookDelay caps the doubling delay (zero: no cap, as the spec
	// says). Useful for long-running demos and for tests that exhaust every
	// retry quickly.
	MaxWebhookDelay time.Duration
	// MaxWebhookRetries is how many times a webhook is retried after its
	// first attempt. Zero means 20, the spec's maximum; a negative value
	// means no retry at all.
	MaxWebhookRetries int
	// WebhookTimeout bounds each attempt. Default 3s, the response time
	// the spec expects from the receiver.
	WebhookTimeout time.Duration
	// DuplicateWebhooks is the probability (0 to 1) that a webhook is
	// delivered a second time after the first delivery; 1 duplicates every
	// webhook. Draws come from the seeded generator.
	DuplicateWebhooks float64
	// OutOfOrder makes every final webhook followed by a delivery of the
	// order's previous, older state (processing), as a late retry from the
	// provider would look.
	OutOfOrder bool
	// RefundWebhooks sends the order again when one of its refunds reaches
	// a final status. The spec does not say whether refunds cause webhooks;
	// off by default.
	RefundWebhooks bool

	// MinAmount and MaxAmount bound the amount of payin and payout
	// creations (AMOUNT_LESS_THAN_ALLOWED, AMOUNT_GREATER_THAN_ALLOWED).
	// Empty means unbounded.
	MinAmount, MaxAmount string
	// FeePercent is the provider's fee on payins, in percent of the
	// authorized amount, rounded to cents. Default "2"; "0" means no fee.
	FeePercent string
	// RequisiteMinAmount is the minAmount of new requisites. Default "10.00".
	RequisiteMinAmount string
	// InitialBalances maps currency to the starting balance, e.g.
	// {"brl": "1000.00"}.
	InitialBalances map[string]string

	// AutoComplete, when positive, completes every payin, payout, deposit
	// and refund created through the API this long after its creation, so
	// a demo runs without anyone calling Complete.
	AutoComplete time.Duration

	// AllowedIPs, when set, lists the client IPs allowed to call the API;
	// others get REQUEST_FROM_UNTRUSTED_SOURCE.
	AllowedIPs []string
	// AllowedReferers, when set, lists the hosts a Referer header may name;
	// a request with another referer gets
	// REFERER_REQUEST_DOES_NOT_MATCH_ALLOWED_SOURCES.
	AllowedReferers []string

	// ControlAPI also serves the test controls over HTTP under /_control/
	// on the server's listener (see ControlHandler).
	ControlAPI bool

	// Seed seeds the generator behind ids, codes and duplicate draws. Zero
	// picks a random seed, so that two runs never share order ids.
	Seed uint64
	// Now is the clock for every timestamp the server writes. Default
	// time.Now. Webhook retry delays and the times in CallRecord and
	// WebhookAttempt are real time, whatever Now says.
	Now func() time.Time
	// Logger receives one line per request and webhook attempt. Default:
	// discard.
	Logger *slog.Logger
	// WebhookClient sends webhooks. Default: a client of its own, whose
	// idle connections are closed by Close.
	WebhookClient *http.Client
	// Listen is the address to listen on. Default "127.0.0.1:0".
	Listen string
	// MaxRecords bounds how many CallRecords and WebhookAttempts are kept
	// (each); the oldest go first. Default 10000.
	MaxRecords int
	// StateFile, when set, keeps the provider's books across restarts:
	// orders and their transactions, requisites, balances and reserved
	// amounts. Start reads the file when it exists (InitialBalances then
	// apply to nothing: the balances are the file's) and creates it when
	// it does not; every change is written to it soon after, and Close
	// writes it a last time. Writes are atomic (a temporary file renamed
	// into place). Webhook deliveries and retries in flight, timers,
	// faults and the call and webhook logs are not kept.
	StateFile string
}

const (
	defaultAPIKey             = "test-api-key"
	defaultWebhookBaseDelay   = time.Second
	defaultMaxWebhookRetries  = 20
	defaultWebhookTimeout     = 3 * time.Second
	defaultFeePercent         = "2"
	defaultRequisiteMinAmount = "10.00"
	defaultListen             = "127.0.0.1:0"
	defaultMaxRecords         = 10000
)

func (o Options) withDefaults() Options {
	if o.APIKey == "" {
		o.APIKey = defaultAPIKey
	}
	if o.WebhookBaseDelay <= 0 {
		o.WebhookBaseDelay = defaultWebhookBaseDelay
	}
	switch {
	case o.MaxWebhookRetries == 0:
		o.MaxWebhookRetries = defaultMaxWebhookRetries
	case o.MaxWebhookRetries < 0:
		o.MaxWebhookRetries = 0
	}
	if o.WebhookTimeout <= 0 {
		o.WebhookTimeout = defaultWebhookTimeout
	}
	if o.FeePercent == "" {
		o.FeePercent = defaultFeePercent
	}
	if o.RequisiteMinAmount == "" {
		o.RequisiteMinAmount = defaultRequisiteMinAmount
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Listen == "" {
		o.Listen = defaultListen
	}
	if o.MaxRecords <= 0 {
		o.MaxRecords = defaultMaxRecords
	}
	return o
}

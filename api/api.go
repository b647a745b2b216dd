package api

import (
	"context"
	"encoding/json"
	"html/template"
	"log/slog"
	"net/http"
	"time"

	"orderd/provider"
	"orderd/store"
)

// DefaultMaxBodyBytes bounds a request body when Config.MaxBodyBytes is zero.
const DefaultMaxBodyBytes = 1 << 20

// Config configures the admin API.
type Config struct {
	// Token is the admin bearer token; empty means no authentication.
	Token string
	// PublicURL is the receiver's public URL; creations without a
	// webhookUrl get it, so the provider's webhooks reach orderd.
	PublicURL string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives the API's log lines; nil discards them.
	Logger *slog.Logger
	// MaxBodyBytes bounds a request body (413 beyond it); zero means
	// DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// ReadyTimeout bounds each readiness check; zero means 2 s.
	ReadyTimeout time.Duration
}

// Check is a named readiness check, such as "nats". /readyz fails with
// its name when Check returns an error.
type Check struct {
	Name  string
	Check func(ctx context.Context) error
}

// Deps are the parts the API serves from. Store is required; Provider is
// required for the gateway (without it the gateway answers 503); the
// handlers are optional.
type Deps struct {
	Store    Store
	Provider Provider
	// Checks are readiness checks beside the store's own.
	Checks []Check
	// Metrics serves GET /metrics (promhttp over the daemon's registry).
	Metrics http.Handler
	// Reports serves GET /v1/reports/reconciliation when set.
	Reports http.Handler
	// ReportFiles serves GET /v1/reports/files (the list) and GET
	// /v1/reports/files/{name} (one file) when set; the handler reads the
	// name with r.PathValue("name"). NewReportFiles builds it.
	ReportFiles http.Handler
	// Dashboard serves GET / when set.
	Dashboard http.Handler
	// Cluster serves GET /v1/cluster and POST /v1/cluster/snapshot in
	// replicated mode.
	Cluster Cluster
	// Migrations, when set, lists the background migrations for /readyz's
	// detail (store.Store.BackgroundMigrations).
	Migrations func(ctx context.Context) ([]store.MigrationProgress, error)
}

// Readiness reports whether the store can commit a write.
type Readiness interface {
	Ready(ctx context.Context) error
}

// OrderReader reads stored orders.
type OrderReader interface {
	OrderByMerchantID(ctx context.Context, merchantOrderID string) (*store.OrderView, error)
	OrdersPage(ctx context.Context, q store.OrderQuery) (store.OrderPage, error)
	HasOddOrderWord(ctx context.Context, field, value string) (bool, error)
}

// FindingReader lists the reconciler's findings.
type FindingReader interface {
	FindingsPage(ctx context.Context, q store.FindingQuery) ([]store.Finding, error)
}

// AttemptStore records the gateway's attempts and the orders they create.
type AttemptStore interface {
	BeginAttempt(ctx context.Context, na store.NewAttempt) (store.Attempt, bool, error)
	FinishAttempt(ctx context.Context, id int64, out store.AttemptOutcome) (store.Attempt, error)
	AttemptsByMerchantID(ctx context.Context, merchantOrderID string) ([]store.Attempt, error)
	ListAttempts(ctx context.Context, q store.AttemptQuery) ([]store.Attempt, error)
	AddWatch(ctx context.Context, w store.Watch) error
	UpsertRequisite(ctx context.Context, r store.Requisite) error
}

// OutboxAdmin queues set-aside events anew.
type OutboxAdmin interface {
	RequeueSetAside(ctx context.Context) (int64, error)
}

// Store is everything the API needs from the store; *store.Store has it.
type Store interface {
	Readiness
	OrderReader
	FindingReader
	FindingActor
	AttemptStore
	OutboxAdmin
}

// Provider is the provider's create endpoints; *provider.Client has them.
type Provider interface {
	CreatePayment(ctx context.Context, req provider.PaymentRequest) (*provider.Order, json.RawMessage, error)
	CreateWithdrawal(ctx context.Context, req json.RawMessage) (json.RawMessage, error)
	CreateRefund(ctx context.Context, req provider.RefundRequest) (*provider.Order, json.RawMessage, error)
	CreateRequisite(ctx context.Context, req provider.RequisiteRequest) (*provider.Requisite, json.RawMessage, error)
	DeactivateRequisite(ctx context.Context, id string) (json.RawMessage, error)
}

var (
	_ Store    = (*store.Store)(nil)
	_ Provider = (*provider.Client)(nil)
)

// server holds what the handlers share.
type server struct {
	cfg  Config
	deps Deps
	log  *slog.Logger
	now  func() time.Time
	// findingForm is the page that answers a refused dashboard form.
	findingForm *template.Template
}

// New returns the admin API's handler.
func New(cfg Config, deps Deps) http.Handler {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = 2 * time.Second
	}
	s := &server{cfg: cfg, deps: deps, log: cfg.Logger, now: cfg.Now, findingForm: parseFindingForm()}
	return s.handler()
}

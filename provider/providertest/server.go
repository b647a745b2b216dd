package providertest

import (
	"context"
	"crypto"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/shopspring/decimal"

	"orderd/provider"
)

// Errors returned by the controls.
var (
	// ErrNotFound means the order, refund or requisite named does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict means the state of the order or refund does not allow
	// the transition asked for.
	ErrConflict = errors.New("conflict")
)

// Server is a running fake provider. Create it with NewServer or Start and
// stop it with Close. All methods are safe for concurrent use.
type Server struct {
	opts       Options
	log        *slog.Logger
	key        crypto.Signer
	pubPEM     []byte
	feePercent decimal.Decimal
	minAmount  *decimal.Decimal
	maxAmount  *decimal.Decimal
	reqMin     decimal.Decimal
	allowedIPs map[string]bool
	// checkoutPage renders the page auth.redirectUrl points at.
	checkoutPage *template.Template

	ln       net.Listener
	httpSrv  *http.Server
	url      string
	handler  http.Handler
	client   *http.Client
	ownedTr  *http.Transport
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	serveErr chan error

	mu         sync.Mutex
	closed     bool
	rng        *rand.Rand
	seq        int
	depositSeq int
	orders     map[string]*order // by merchantOrderId
	byID       map[string]*order
	requisites map[string]*requisite
	balances   map[string]decimal.Decimal
	reserved   map[string]decimal.Decimal
	faults     []*Fault
	calls      []CallRecord
	webhooks   []WebhookAttempt
	deliveries int
	pending    int
	idle       chan struct{} // closed while no webhook delivery is pending
	override   string

	// With Options.StateFile: version counts changes of the books, saved
	// is the version last written, saveReq wakes the saver, saveMu keeps
	// two saves from interleaving, restored says the file was read.
	version  uint64
	saved    uint64
	saveReq  chan struct{}
	saveMu   sync.Mutex
	restored bool
}

// NewServer starts a fake provider on opts.Listen (default a free loopback
// port) and panics if it cannot, like httptest.NewServer. Use Start to get
// the error instead.
func NewServer(opts Options) *Server {
	s, err := Start(opts)
	if err != nil {
		panic("providertest: " + err.Error())
	}
	return s
}

// Start starts a fake provider on opts.Listen and returns it, or an error
// naming the option that is wrong or the address that cannot be bound.
func Start(opts Options) (*Server, error) {
	s, err := newServer(opts)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", s.opts.Listen)
	if err != nil {
		s.cancel()
		return nil, fmt.Errorf("listen %s: %w", s.opts.Listen, err)
	}
	s.ln = ln
	s.url = "http://" + ln.Addr().String()
	s.httpSrv = &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return s.ctx },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	s.serveErr = make(chan error, 1)
	go func() { s.serveErr <- s.httpSrv.Serve(ln) }()
	if s.opts.StateFile != "" {
		s.mu.Lock()
		if !s.restored {
			s.changedLocked() // a fresh start creates the file
		}
		s.goLocked(false, s.saver)
		s.mu.Unlock()
	}
	return s, nil
}

func newServer(opts Options) (*Server, error) {
	opts = opts.withDefaults()
	s := &Server{
		opts:       opts,
		log:        opts.Logger.With("component", "providertest"),
		orders:     map[string]*order{},
		byID:       map[string]*order{},
		requisites: map[string]*requisite{},
		balances:   map[string]decimal.Decimal{},
		reserved:   map[string]decimal.Decimal{},
		idle:       make(chan struct{}),
	}
	close(s.idle)
	var err error
	if s.feePercent, err = decimal.NewFromString(opts.FeePercent); err != nil || s.feePercent.IsNegative() {
		return nil, fmt.Errorf("options: FeePercent %q is not a non-negative number", opts.FeePercent)
	}
	if s.reqMin, err = provider.ParseAmount(opts.RequisiteMinAmount); err != nil {
		return nil, fmt.Errorf("options: RequisiteMinAmount: %w", err)
	}
	if s.minAmount, err = optionalAmount("MinAmount", opts.MinAmount); err != nil {
		return nil, err
	}
	if s.maxAmount, err = optionalAmount("MaxAmount", opts.MaxAmount); err != nil {
		return nil, err
	}
	for ccy, amount := range opts.InitialBalances {
		d, err := provider.ParseAmount(amount)
		if err != nil {
			return nil, fmt.Errorf("options: InitialBalances[%s]: %w", ccy, err)
		}
		s.balances[strings.ToLower(ccy)] = cents(d)
	}
	if opts.StateFile != "" {
		s.saveReq = make(chan struct{}, 1)
		if s.restored, err = s.loadState(opts.StateFile); err != nil {
			return nil, err
		}
	}
	if len(opts.AllowedIPs) > 0 {
		s.allowedIPs = map[string]bool{}
		for _, ip := range opts.AllowedIPs {
			s.allowedIPs[ip] = true
		}
	}
	seed := opts.Seed
	if seed == 0 {
		var b [8]byte
		_, _ = crand.Read(b[:])
		seed = binary.LittleEndian.Uint64(b[:])
	}
	s.rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	s.key = opts.Key
	if s.key == nil {
		if s.key, s.pubPEM, err = GenerateKey(opts.KeyType); err != nil {
			return nil, fmt.Errorf("options: KeyType: %w", err)
		}
	} else if s.pubPEM, err = PublicKeyPEM(s.key); err != nil {
		return nil, fmt.Errorf("options: Key: %w", err)
	}
	if _, err := Sign(s.key, nil); err != nil {
		return nil, fmt.Errorf("options: Key: %w", err)
	}

	s.client = opts.WebhookClient
	if s.client == nil {
		s.ownedTr = http.DefaultTransport.(*http.Transport).Clone()
		s.client = &http.Client{Transport: s.ownedTr}
	}
	s.checkoutPage = template.Must(template.New("checkout").Parse(checkoutHTML))
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.handler = s.routes()
	return s, nil
}

// URL is the base URL of the fake, e.g. "http://127.0.0.1:41234"; the API
// lives under URL()+"/api/v3/".
func (s *Server) URL() string { return s.url }

// APIKey is the value the Authorization header must carry.
func (s *Server) APIKey() string { return s.opts.APIKey }

// PublicKeyPEM is the webhook signing key's public half as a PEM "PUBLIC
// KEY" block, the file a merchant configures to verify webhooks.
func (s *Server) PublicKeyPEM() []byte { return append([]byte(nil), s.pubPEM...) }

// Signer is the webhook signing key, for tests that sign bodies of their own.
func (s *Server) Signer() crypto.Signer { return s.key }

// Handler is what the server's listener serves: the provider API and, with
// Options.ControlAPI, the controls under /_control/. It can be mounted on
// another server too.
func (s *Server) Handler() http.Handler { return s.handler }

// Close stops the listener, cancels every webhook delivery and timer and
// waits for their goroutines. It is safe to call more than once.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	if s.httpSrv != nil {
		_ = s.httpSrv.Close()
		<-s.serveErr
	}
	s.wg.Wait()
	if s.ownedTr != nil {
		s.ownedTr.CloseIdleConnections()
	}
	if s.opts.StateFile != "" {
		if err := s.save(); err != nil {
			s.log.Error("save state", "file", s.opts.StateFile, "err", err)
		}
	}
}

// Restored reports whether the server started from the books in an
// existing Options.StateFile rather than afresh.
func (s *Server) Restored() bool { return s.restored }

// goLocked runs f on a goroutine the server owns; Close cancels s.ctx and
// waits for it. Webhook deliveries also count as pending for WaitIdle.
// Nothing starts once the server is closed.
func (s *Server) goLocked(delivery bool, f func()) {
	if s.closed {
		return
	}
	s.wg.Add(1)
	if delivery {
		if s.pending == 0 {
			s.idle = make(chan struct{})
		}
		s.pending++
	}
	go func() {
		defer s.wg.Done()
		if delivery {
			defer s.deliveryDone()
		}
		f()
	}()
}

func (s *Server) deliveryDone() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending--
	if s.pending == 0 {
		close(s.idle)
	}
}

// WaitIdle waits until no webhook delivery is pending (each has succeeded
// or used up its retries) or ctx ends.
func (s *Server) WaitIdle(ctx context.Context) error {
	s.mu.Lock()
	idle := s.idle
	s.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for webhooks: %w", ctx.Err())
	}
}

// sleep waits d or until the server closes; it reports whether d passed.
func (s *Server) sleep(d time.Duration) bool {
	if d <= 0 {
		return s.ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.ctx.Done():
		return false
	}
}

// scheduleAutoCompleteLocked completes an order (refundID empty) or a refund
// after Options.AutoComplete, when that is set.
func (s *Server) scheduleAutoCompleteLocked(merchantOrderID, refundID string) {
	if s.opts.AutoComplete <= 0 {
		return
	}
	s.goLocked(false, func() {
		if !s.sleep(s.opts.AutoComplete) {
			return
		}
		var err error
		if refundID == "" {
			err = s.Complete(merchantOrderID)
		} else {
			err = s.CompleteRefund(merchantOrderID, refundID, true)
		}
		if err != nil && !errors.Is(err, ErrConflict) {
			s.log.Warn("auto-complete", "merchantOrderId", merchantOrderID, "refundId", refundID, "err", err)
		}
	})
}

func optionalAmount(name, v string) (*decimal.Decimal, error) {
	if v == "" {
		return nil, nil
	}
	d, err := provider.ParseAmount(v)
	if err != nil {
		return nil, fmt.Errorf("options: %s: %w", name, err)
	}
	return &d, nil
}

package hostile_test

import (
	"bytes"
	"context"
	"crypto"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"orderd/provider/providertest"
	"orderd/test/support/testbin"
)

// The daemon is shared by the package's tests, which run one after another
// (none is parallel) so that row counts taken before and after a case see
// only that case. It is started on first use and stopped by TestMain.
var (
	daemonOnce sync.Once
	shared     *daemon
	sharedErr  error
	workDir    string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "orderd-hostile-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	workDir = dir
	code := m.Run()
	if shared != nil {
		if err := shared.stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop orderd:", err)
			if code == 0 {
				code = 1
			}
		}
		shared.fake.Close()
		shared.db.Close()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// theDaemon returns the running shared daemon, starting it on first use.
func theDaemon(t *testing.T) *daemon {
	t.Helper()
	daemonOnce.Do(func() { shared, sharedErr = newDaemon(workDir) })
	if sharedErr != nil {
		t.Fatalf("start orderd: %v", sharedErr)
	}
	if !shared.running() {
		t.Fatalf("orderd is not running; its log:\n%s", shared.logTail())
	}
	return shared
}

// daemon is one orderd process with its config, keys and database.
type daemon struct {
	bin, dir, cfgPath, logPath, dbPath string

	// The listeners' addresses, read from the log at each start.
	recvAddr  string // 127.0.0.1:port
	recvURL   string
	adminURL  string
	adminHost netip.Addr // where the admin listener is bound
	token     string
	apiKey    string

	key, otherKey crypto.Signer
	fake          *providertest.Server
	db            *sql.DB // read-only view of the store, as an operator's sqlite3

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	seq     atomic.Int64
}

func newDaemon(dir string) (*daemon, error) {
	d := &daemon{dir: dir, dbPath: filepath.Join(dir, "orderd.db"), logPath: filepath.Join(dir, "orderd.log")}
	d.bin = filepath.Join(dir, "orderd")
	if err := testbin.Orderd(d.bin); err != nil {
		return nil, err
	}
	var err error
	var pub []byte
	if d.key, pub, err = providertest.GenerateKey(providertest.KeyRSA); err != nil {
		return nil, err
	}
	if d.otherKey, _, err = providertest.GenerateKey(providertest.KeyRSA); err != nil {
		return nil, err
	}
	pubPath := filepath.Join(dir, "provider-public.pem")
	if err := os.WriteFile(pubPath, pub, 0o644); err != nil {
		return nil, err
	}
	// The fake signs with the same key, so its webhooks verify too.
	d.fake = providertest.NewServer(providertest.Options{Key: d.key, WebhookBaseDelay: 50 * time.Millisecond})
	d.apiKey = d.fake.APIKey()
	d.token = "hostile-admin-token-3f9c2a71"
	tokenPath := filepath.Join(dir, "admin-token")
	if err := os.WriteFile(tokenPath, []byte(d.token+"\n"), 0o600); err != nil {
		return nil, err
	}

	// Every listener is on port 0; start reads the bound addresses back
	// from the daemon's "orderd started" line. The admin listener goes on
	// an address other hosts could reach, when the machine has one, so the
	// token is tested from beyond loopback.
	d.adminHost = netip.MustParseAddr("127.0.0.1")
	if ip, ok := nonLoopbackAddr(); ok {
		d.adminHost = ip
	}

	d.cfgPath = filepath.Join(dir, "config.yaml")
	cfg := fmt.Sprintf(`provider:
  base_url: %s
  api_key: %s
  public_keys: [%s]
  timeout: 2s
receiver:
  listen: %s
admin:
  listen: %s
  token_file: %s
store:
  path: %s
nats:
  embedded:
    listen: %s
    store_dir: %s
reconcile:
  schedules: {stale: "off", doubt: "off", balances: "off", requisites: "off", report: "off"}
reports:
  dir: %s
log:
  level: info
  format: json
`, d.fake.URL(), d.apiKey, pubPath, "127.0.0.1:0", netip.AddrPortFrom(d.adminHost, 0), tokenPath, d.dbPath, "127.0.0.1:0",
		filepath.Join(dir, "nats"), filepath.Join(dir, "reports"))
	if err := os.WriteFile(d.cfgPath, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	if err := d.start(); err != nil {
		return nil, err
	}
	d.db, err = sql.Open("sqlite", "file:"+d.dbPath+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		return nil, err
	}
	return d, nil
}

// start runs the binary, reads the addresses it bound from its log, and
// waits until /readyz answers 200.
func (d *daemon) start() error {
	logf, err := os.OpenFile(d.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	from, err := logf.Seek(0, io.SeekEnd)
	if err != nil {
		logf.Close()
		return err
	}
	// Each start binds new ports.
	d.recvAddr, d.recvURL, d.adminURL = "", "", ""
	cmd := exec.Command(d.bin, "run", "-config", d.cfgPath)
	cmd.Dir = d.dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + d.dir}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	exited := make(chan struct{})
	d.mu.Lock()
	d.cmd, d.exited = cmd, exited
	d.mu.Unlock()
	go func() {
		err := cmd.Wait()
		logf.Close()
		d.mu.Lock()
		d.waitErr = err
		d.mu.Unlock()
		close(exited)
	}()

	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("orderd exited before it was ready:\n%s", d.logTail())
		default:
		}
		if d.adminURL == "" {
			d.readAddrs(from)
			time.Sleep(20 * time.Millisecond)
			continue
		}
		resp, err := client.Get(d.adminURL + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = d.stop()
	return fmt.Errorf("orderd not ready within 30s:\n%s", d.logTail())
}

// readAddrs looks for the "orderd started" line in the log written since
// offset from and, once it is there, sets the addresses from it.
func (d *daemon) readAddrs(from int64) {
	b, err := os.ReadFile(d.logPath)
	if err != nil || int64(len(b)) < from {
		return
	}
	for _, line := range strings.Split(string(b[from:]), "\n") {
		var started struct{ Msg, Webhooks, Admin string }
		if json.Unmarshal([]byte(line), &started) != nil || started.Msg != "orderd started" {
			continue
		}
		d.recvAddr = started.Webhooks
		d.recvURL = "http://" + started.Webhooks + "/webhooks/orders"
		d.adminURL = "http://" + started.Admin
		return
	}
}

// stop sends SIGTERM to the process by its PID and waits for it to exit;
// after 20 s it is killed.
func (d *daemon) stop() error {
	d.mu.Lock()
	cmd, exited := d.cmd, d.exited
	d.mu.Unlock()
	if cmd == nil {
		return nil
	}
	select {
	case <-exited:
		return errors.New("orderd had already exited")
	default:
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-exited:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		return errors.New("orderd did not stop within 20s of SIGTERM")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cmd = nil
	return d.waitErr
}

func (d *daemon) running() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil {
		return false
	}
	select {
	case <-d.exited:
		return false
	default:
		return true
	}
}

// restart stops and starts the daemon on the same config and database.
func (d *daemon) restart(t *testing.T) {
	t.Helper()
	if err := d.stop(); err != nil {
		t.Fatalf("stop: %v\n%s", err, d.logTail())
	}
	if err := d.start(); err != nil {
		t.Fatalf("start again: %v", err)
	}
}

// log returns the daemon's whole log so far.
func (d *daemon) log(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(d.logPath)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (d *daemon) logTail() string {
	b, _ := os.ReadFile(d.logPath)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// nonLoopbackAddr returns an IPv4 address of this host that is not
// loopback or link-local and can be listened on, if there is one.
func nonLoopbackAddr() (netip.Addr, bool) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return netip.Addr{}, false
	}
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(n.IP)
		if !ok {
			continue
		}
		ip = ip.Unmap()
		if !ip.Is4() || ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsUnspecified() {
			continue
		}
		if ln, err := net.Listen("tcp", netip.AddrPortFrom(ip, 0).String()); err == nil {
			ln.Close()
			return ip, true
		}
	}
	return netip.Addr{}, false
}

// rows counts the rows that hold order data, events and attempts.
// OrderEvents are the outbox rows of order states; Outbox counts every
// event, findings included.
type rows struct {
	Orders, Deliveries, History, OrderEvents, Outbox, Quarantine, Attempts int
}

func (d *daemon) rows(t *testing.T) rows {
	t.Helper()
	var r rows
	err := d.db.QueryRowContext(t.Context(), `SELECT
		(SELECT count(*) FROM orders), (SELECT count(*) FROM webhook_deliveries),
		(SELECT count(*) FROM order_history), (SELECT count(*) FROM outbox WHERE state_id IS NOT NULL),
		(SELECT count(*) FROM outbox), (SELECT count(*) FROM quarantine), (SELECT count(*) FROM attempts)`).
		Scan(&r.Orders, &r.Deliveries, &r.History, &r.OrderEvents, &r.Outbox, &r.Quarantine, &r.Attempts)
	if err != nil {
		t.Fatalf("count rows: %v", err)
	}
	return r
}

// queryString reads one TEXT or BLOB value.
func (d *daemon) queryString(t *testing.T, q string, args ...any) string {
	t.Helper()
	var s []byte
	if err := d.db.QueryRowContext(t.Context(), q, args...).Scan(&s); err != nil {
		t.Fatalf("%s %v: %v", q, args, err)
	}
	return string(s)
}

func (d *daemon) queryInt(t *testing.T, q string, args ...any) int {
	t.Helper()
	var n int
	if err := d.db.QueryRowContext(t.Context(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s %v: %v", q, args, err)
	}
	return n
}

// sign returns the Signature header for body under the provider's key.
func (d *daemon) sign(t *testing.T, body []byte) string {
	t.Helper()
	return signWith(t, d.key, body)
}

func signWith(t *testing.T, key crypto.Signer, body []byte) string {
	t.Helper()
	sig, err := providertest.Sign(key, body)
	if err != nil {
		t.Fatal(err)
	}
	return sig
}

// reply is an answer as a client sees it.
type reply struct {
	code   int
	status string // the receiver's status word, or the admin API's
	body   string
}

// post sends body to the webhook endpoint with the given Signature ("" for
// none) and waits at most 10 s for the answer.
func (d *daemon) post(t *testing.T, body []byte, sig string) reply {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, d.recvURL, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if sig != "" {
		req.Header.Set("Signature", sig)
	}
	return do(t, http.DefaultClient, req)
}

// postSigned sends body signed with the provider's key.
func (d *daemon) postSigned(t *testing.T, body []byte) reply {
	t.Helper()
	return d.post(t, body, d.sign(t, body))
}

func do(t *testing.T, client *http.Client, req *http.Request) reply {
	t.Helper()
	ctx, cancel := context.WithTimeout(req.Context(), 10*time.Second)
	defer cancel()
	resp, err := client.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil && !(errors.Is(err, syscall.ECONNRESET) && resp.StatusCode >= 400) {
		t.Fatalf("read answer: %v", err)
	}
	// A refusal's body may be cut by a reset: the server answers and
	// closes while the client's oversized request is still unread, and on
	// a busy machine the kernel's reset can overtake the answer's body.
	// The status line arrived; that is the answer.
	var word struct {
		Status string `json:"status"`
		State  string `json:"state"`
	}
	_ = json.Unmarshal(b, &word)
	status := word.Status
	if status == "" {
		status = word.State
	}
	return reply{code: resp.StatusCode, status: status, body: string(b)}
}

// wantReply fails unless r has the code and status word.
func wantReply(t *testing.T, r reply, code int, status string) {
	t.Helper()
	if r.code != code || r.status != status {
		t.Fatalf("answer %d %q (%s), want %d %q", r.code, r.status, strings.TrimSpace(r.body), code, status)
	}
}

// order describes a webhook body in the provider's shape.
type order struct {
	id, moid, status string
	// amount is authorized from the customer; net reaches the merchant.
	amount, net string
}

// newOrder returns a completed payin with ids unique in this run.
func (d *daemon) newOrder(status string) order {
	n := d.seq.Add(1)
	return order{
		id:     fmt.Sprintf("0bad0000-0000-4000-8000-%012d", n),
		moid:   fmt.Sprintf("hostile-%d", n),
		status: status,
		amount: "100.00",
		net:    "98.00",
	}
}

// JSON is the webhook body, as the provider writes it.
func (o order) JSON() []byte {
	target, completedAt, txStatus := "null", "null", "processing"
	if o.status == "completed" {
		target = fmt.Sprintf(`{"amount":%q,"currency":"brl"}`, o.net)
		completedAt = `"2024-05-01T10:02:00+00:00"`
		txStatus = "completed"
	}
	return fmt.Appendf(nil, `{"id":%q,"merchantOrderId":%q,"type":"payin","createdAt":"2024-05-01T10:00:00Z",`+
		`"status":%q,"rejectReason":null,"merchantSourceWallet":null,"merchantTargetWallet":%s,`+
		`"transactions":[{"id":"%s-tx","type":"payin","status":%q,"authorized":{"amount":%q,"currency":"brl"},`+
		`"merchantWallet":{"amount":%q,"currency":"brl"},"counterpartyInfo":null,"paymentInfo":null,`+
		`"createdAt":"2024-05-01T10:00:01Z","completedAt":%s,"rejectReason":null}]}`,
		o.id, o.moid, o.status, target, o.id, txStatus, o.amount, o.net, completedAt)
}

// admin sends a request to the admin API with the given Authorization
// header value ("" for none).
func (d *daemon) admin(t *testing.T, method, path, auth, body string) reply {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, d.adminURL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return do(t, http.DefaultClient, req)
}

func (d *daemon) bearer() string { return "Bearer " + d.token }

// healthy fails unless the daemon still answers /healthz.
func (d *daemon) healthy(t *testing.T) {
	t.Helper()
	if r := d.admin(t, http.MethodGet, "/healthz", "", ""); r.code != http.StatusOK {
		t.Fatalf("healthz = %d %s\n%s", r.code, r.body, d.logTail())
	}
}

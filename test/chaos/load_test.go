//go:build chaos

package chaos_test

import (
	"bytes"
	"context"
	"crypto"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"orderd/provider/providertest"
)

// signer signs webhooks with a key of the suite's own, whose public PEM
// is one of the instances' provider.public_keys.
type signer struct {
	key    crypto.Signer
	pubKey string
}

func newSigner(t *testing.T, dir string) *signer {
	t.Helper()
	key, pub, err := providertest.GenerateKey(providertest.KeyECDSA)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "suite-signer.pem")
	if err := os.WriteFile(p, pub, 0o644); err != nil {
		t.Fatal(err)
	}
	return &signer{key: key, pubKey: p}
}

// orderBody is a payin webhook body in the provider's get-status shape.
func orderBody(id, moid, status, amount string) []byte {
	target, completedAt := "null", "null"
	if status == "completed" {
		target = `{"amount":"` + amount + `","currency":"brl"}`
		completedAt = `"2026-11-20T10:00:05.000000Z"`
	}
	return []byte(`{"id":"` + id + `","merchantOrderId":"` + moid + `","type":"payin",` +
		`"createdAt":"2026-11-20T10:00:00.000000+00:00","status":"` + status + `","rejectReason":null,` +
		`"merchantSourceWallet":null,"merchantTargetWallet":` + target + `,` +
		`"transactions":[{"id":"` + id[:9] + "1111" + id[13:] + `","type":"payin","status":"` + status + `",` +
		`"authorized":{"amount":"` + amount + `","currency":"brl"},"merchantWallet":{"amount":"` + amount + `","currency":"brl"},` +
		`"counterpartyInfo":null,"paymentInfo":null,"createdAt":"2026-11-20T10:00:00.000000Z",` +
		`"completedAt":` + completedAt + `,"rejectReason":null}]}`)
}

// delivery is one webhook the load sent and the answer it got (0: none).
type delivery struct {
	moid, state string
	to          string // the instance that answered (or was tried last)
	status      int
	at          time.Time // when the answer came
}

// creation is one gateway creation and its answer (0: none).
type creation struct {
	moid   string
	to     string
	status int
}

// load sends pre-signed webhooks to both instances and gateway creations
// to their admin listeners, bounded in count and in time, and records
// every answer.
type load struct {
	w   *world
	rng *rand.Rand
	ns  uint32

	mu         sync.Mutex
	deliveries []delivery
	creations  []creation
}

var postc = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}

func post(ctx context.Context, url, sig string, body []byte) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0
	}
	req.Header.Set("Content-Type", "application/json")
	if sig != "" {
		req.Header.Set("Signature", sig)
	}
	resp, err := postc.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode
}

// order is one order's webhooks, signed before the load starts so that
// signing costs nothing during it.
type order struct {
	moid   string
	states []string
	bodies [][]byte
	sigs   []string
}

// prepare signs n orders: four in five go processing then completed,
// one in five stays processing, so the leader's stale job polls it.
func (l *load) prepare(t *testing.T, n int) []order {
	out := make([]order, n)
	for i := range out {
		id := fmt.Sprintf("%08x-0000-4000-8000-%012x", l.ns, i)
		moid := fmt.Sprintf("chaos-%08x-%d", l.ns, i)
		amount := fmt.Sprintf("%d.%02d", 1+i%997, i%100)
		states := []string{"processing", "completed"}
		if i%5 == 4 {
			states = states[:1]
		}
		o := order{moid: moid, states: states}
		for _, st := range states {
			b := orderBody(id, moid, st, amount)
			sig, err := providertest.Sign(l.w.signer.key, b)
			if err != nil {
				t.Fatal(err)
			}
			o.bodies, o.sigs = append(o.bodies, b), append(o.sigs, sig)
		}
		out[i] = o
	}
	return out
}

// run sends orders at rate per second over workers until ctx ends or
// every order was sent; one creation goes out every creationEvery.
// Every post started is finished, so no answer is left unknown.
func (l *load) run(ctx context.Context, orders []order, rate float64, workers int, creationEvery time.Duration, maxCreations int) {
	jobs := make(chan order)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for o := range jobs {
				l.one(o)
			}
		})
	}
	wg.Go(func() {
		tick := time.NewTicker(creationEvery)
		defer tick.Stop()
		for i := 0; i < maxCreations; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			l.create(i)
		}
	})
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
loop:
	for _, o := range orders {
		select {
		case <-ctx.Done():
			break loop
		case <-tick.C:
		}
		// A busy worker pool skips the tick (and the order): the rate
		// never bunches up after an outage.
		select {
		case jobs <- o:
		default:
		}
	}
	close(jobs)
	wg.Wait()
}

// one sends an order's webhooks in order, each to a random instance and,
// when that gives no answer at all, once to the other (as a balancer
// would). A state answered other than 200 is not sent again: the
// provider would retry it, but the suite checks only what was acked.
func (l *load) one(o order) {
	for i, st := range o.states {
		l.mu.Lock()
		first := l.rng.IntN(len(l.w.ods))
		l.mu.Unlock()
		d := delivery{moid: o.moid, state: st}
		for k := range 2 {
			od := l.w.ods[(first+k)%len(l.w.ods)]
			d.to = od.name
			d.status = post(context.Background(), od.webhooks(), o.sigs[i], o.bodies[i])
			d.at = time.Now()
			if d.status != 0 {
				break
			}
		}
		l.mu.Lock()
		l.deliveries = append(l.deliveries, d)
		l.mu.Unlock()
		if d.status != http.StatusOK {
			return
		}
	}
}

// create asks a random instance's gateway for a payin.
func (l *load) create(i int) {
	l.mu.Lock()
	od := l.w.ods[l.rng.IntN(len(l.w.ods))]
	l.mu.Unlock()
	moid := fmt.Sprintf("chaos-gw-%08x-%d", l.ns, i)
	body := `{"merchantOrderId":"` + moid + `","invoice":{"amount":"` + fmt.Sprintf("%d.00", 10+i%90) +
		`","currency":"brl"},"client":{"name":"Ana"},"returnUrl":"https://shop.example/back"}`
	c := creation{moid: moid, to: od.name, status: post(context.Background(), od.admin()+"/v1/payins", "", []byte(body))}
	l.mu.Lock()
	l.creations = append(l.creations, c)
	l.mu.Unlock()
}

// answeredBetween counts the deliveries answered from from to to: with 200
// and otherwise. Answers after now are not in yet; the count is of what
// has come.
func (l *load) answeredBetween(from, to time.Time) (ok, notOK int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, d := range l.deliveries {
		if d.at.Before(from) || d.at.After(to) {
			continue
		}
		if d.status == http.StatusOK {
			ok++
		} else {
			notOK++
		}
	}
	return ok, notOK
}

package scale

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shopspring/decimal"

	"orderd/provider"
	"orderd/store"
)

// buildConfig is the shape of the database to build.
type buildConfig struct {
	Size    int           // orders
	Start   time.Time     // the first order's creation
	Span    time.Duration // creations spread evenly over [Start, Start+Span)
	Workers int           // concurrent callers of Apply (group commit)
}

// outboxRetention is publish.retention's default.
const outboxRetention = 7 * 24 * time.Hour

// buildStats is what the build did.
type buildStats struct {
	Applies   int64
	Findings  int
	Snapshots int
	Elapsed   time.Duration
}

// The life of order i, chosen by i so that every run builds the same
// database: one in twenty is rejected, one in fifty stays processing, the
// rest complete; one in eight is a payout; one in seven is in usd; one in
// ten completed orders gets a refund webhook an hour later; one in
// twenty-five final webhooks is delivered twice (byte-identical); one in
// a thousand orders has a finding, half of them resolved.
func orderStatus(i int) provider.Status {
	switch {
	case i%20 == 0:
		return provider.StatusRejected
	case i%50 == 1:
		return provider.StatusProcessing
	}
	return provider.StatusCompleted
}

func orderType(i int) string {
	if i%8 == 5 {
		return "payout"
	}
	return "payin"
}

func orderCurrency(i int) string {
	if i%7 == 3 {
		return "usd"
	}
	return "brl"
}

func refunded(i int) bool {
	return orderStatus(i) == provider.StatusCompleted && orderType(i) == "payin" && i%10 == 3
}
func repeated(i int) bool { return i%25 == 7 }
func hasFinding(i int) bool {
	return i%1000 == 999
}

// scaleID is order i's provider id, a UUID-shaped hash of i.
func scaleID(i int, kind string) string {
	s := sha256.Sum256(fmt.Appendf(nil, "%s-%d", kind, i))
	h := hex.EncodeToString(s[:16])
	return h[0:8] + "-" + h[8:12] + "-4" + h[13:16] + "-8" + h[17:20] + "-" + h[20:32]
}

func merchantOrderID(i int) string { return fmt.Sprintf("scale-%09d", i) }

// webhookBody renders order i as the provider's webhook sends it in the
// given status, the refund transaction added when withRefund.
func webhookBody(i int, status provider.Status, created time.Time, withRefund bool) []byte {
	typ, ccy := orderType(i), orderCurrency(i)
	cents := int64(1000 + (i*7919)%500000)
	fee := cents * 3 / 100
	amt := func(c int64) string { return fmt.Sprintf(`{"amount":"%d.%02d","currency":"%s"}`, c/100, c%100, ccy) }
	ts := func(t time.Time) string { return `"` + t.UTC().Format("2006-01-02T15:04:05.000Z") + `"` }
	txStatus, completedAt, reject, merchant := string(status), "null", "null", "null"
	switch status {
	case provider.StatusCompleted:
		completedAt = ts(created.Add(time.Minute))
		merchant = amt(cents - fee)
	case provider.StatusRejected:
		reject = `"declined"`
	}
	orderMerchant := "null"
	if status == provider.StatusCompleted {
		orderMerchant = amt(cents - fee)
	}
	source, target := `null`, orderMerchant
	if typ == "payout" {
		source, target = amt(cents+fee), "null"
	}
	b := fmt.Appendf(nil, `{"id":"%s","merchantOrderId":"%s","type":"%s","createdAt":%s,"status":"%s","rejectReason":%s,`+
		`"merchantSourceWallet":%s,"merchantTargetWallet":%s,"transactions":[{"id":"%s","type":"%s","status":"%s",`+
		`"authorized":%s,"merchantWallet":%s,"counterpartyInfo":{"name":"Customer %d","document":"%011d","bank":"001"},`+
		`"paymentInfo":{"method":"pix","endToEndId":"E%031d"},"createdAt":%s,"completedAt":%s,"rejectReason":%s}`,
		scaleID(i, "order"), merchantOrderID(i), typ, ts(created), status, reject, source, target,
		scaleID(i, "tx"), typ, txStatus, amt(cents), merchant, i, i, i, ts(created), completedAt, reject)
	if withRefund {
		rc := cents / 3
		b = fmt.Appendf(b, `,{"id":"%s","type":"refund","status":"completed","amount":%s,"counterpartyInfo":null,`+
			`"paymentInfo":null,"createdAt":%s,"completedAt":%s,"rejectReason":null}`,
			scaleID(i, "refund"), amt(rc), ts(created.Add(time.Hour)), ts(created.Add(time.Hour+10*time.Second)))
	}
	return append(b, "]}"...)
}

// observation is a webhook observation of body, received at at.
func observation(body []byte, at time.Time) (store.Observation, error) {
	o, err := provider.DecodeOrder(body)
	if err != nil {
		return store.Observation{}, fmt.Errorf("decode generated order: %w\n%s", err, body)
	}
	// A signature's size (RSA-2048, base64), unique per body.
	sum := sha256.Sum256(body)
	sig := base64.StdEncoding.EncodeToString(bytes.Repeat(sum[:], 8))
	return store.Observation{
		Source: store.SourceWebhook, Order: o, Raw: body, ObservedAt: at,
		Delivery: &store.Delivery{RemoteAddr: "203.0.113.7:41234", Header: http.Header{
			"Content-Type": {"application/json"},
			"Signature":    {sig},
			"User-Agent":   {"provider-webhooks/2.1"},
		}},
	}, nil
}

// build applies the life of every order through the store's write path
// (Apply with webhook observations, many callers, group commit), then
// findings, balance snapshots every 15 minutes of the span, and marks
// every event published, as a database that has run for the span holds
// it. progress, when not nil, gets a line now and then.
func build(ctx context.Context, path string, cfg buildConfig, progress io.Writer) (buildStats, error) {
	var clock atomic.Int64
	clock.Store(cfg.Start.UnixMilli())
	st, err := store.Open(ctx, path, store.Options{Now: func() time.Time { return time.UnixMilli(clock.Load()).UTC() }})
	if err != nil {
		return buildStats{}, err
	}
	t0 := time.Now()
	var stats buildStats
	step := cfg.Span / time.Duration(max(cfg.Size, 1))
	created := func(i int) time.Time { return cfg.Start.Add(time.Duration(i) * step) }

	var (
		applies  atomic.Int64
		next     atomic.Int64
		firstErr error
		errOnce  sync.Once
		wg       sync.WaitGroup
	)
	fail := func(err error) { errOnce.Do(func() { firstErr = err }) }
	apply := func(body []byte, at time.Time) bool {
		ob, err := observation(body, at)
		if err == nil {
			_, err = st.Apply(ctx, ob)
		}
		if err != nil {
			fail(err)
			return false
		}
		applies.Add(1)
		return true
	}
	for range max(cfg.Workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= cfg.Size || ctx.Err() != nil || firstErr != nil {
					return
				}
				c := created(i)
				clock.Store(c.UnixMilli())
				if !apply(webhookBody(i, provider.StatusProcessing, c, false), c.Add(2*time.Second)) {
					return
				}
				s := orderStatus(i)
				if s == provider.StatusProcessing {
					continue
				}
				final := webhookBody(i, s, c, false)
				if !apply(final, c.Add(time.Minute+time.Second)) {
					return
				}
				if repeated(i) && !apply(final, c.Add(time.Minute+31*time.Second)) {
					return
				}
				if refunded(i) && !apply(webhookBody(i, s, c, true), c.Add(time.Hour+11*time.Second)) {
					return
				}
				if progress != nil && i > 0 && i%100_000 == 0 {
					fmt.Fprintf(progress, "built %d orders in %s\n", i, time.Since(t0).Round(time.Second))
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		st.Close(ctx)
		return buildStats{}, firstErr
	}
	if err := ctx.Err(); err != nil {
		st.Close(ctx)
		return buildStats{}, err
	}
	stats.Applies = applies.Load()

	// Findings, as the stale job opens them about orders that went quiet;
	// every other one is resolved later.
	for i := range cfg.Size {
		if !hasFinding(i) {
			continue
		}
		at := created(i).Add(10 * time.Minute)
		clock.Store(at.UnixMilli())
		key := scaleID(i, "order")
		err := st.Write(ctx, func(tx *store.Tx) error {
			_, _, err := tx.OpenFinding("stuck_order", key, map[string]string{
				"merchantOrderId": merchantOrderID(i), "reason": "no final status after 10m",
			})
			return err
		})
		if err == nil && i%2000 == 999 {
			clock.Store(at.Add(time.Hour).UnixMilli())
			err = st.Write(ctx, func(tx *store.Tx) error {
				_, err := tx.ResolveFinding("stuck_order", key)
				return err
			})
		}
		if err != nil {
			st.Close(ctx)
			return buildStats{}, fmt.Errorf("finding: %w", err)
		}
		stats.Findings++
	}

	// Balance snapshots every 15 minutes, per currency.
	bal := map[string]decimal.Decimal{"brl": decimal.RequireFromString("100000.00"), "usd": decimal.RequireFromString("20000.00")}
	for at := cfg.Start; at.Before(cfg.Start.Add(cfg.Span)); at = at.Add(15 * time.Minute) {
		for _, ccy := range []string{"brl", "usd"} {
			bal[ccy] = bal[ccy].Add(decimal.New(int64(at.Minute()+1)*1000, -2))
			if _, err := st.InsertBalanceSnapshot(ctx, ccy, bal[ccy], at, 0); err != nil {
				st.Close(ctx)
				return buildStats{}, err
			}
			stats.Snapshots++
		}
	}

	// Every event has long been published in a database of this age.
	var last int64
	if err := st.DB().QueryRowContext(ctx, `SELECT coalesce(max(seq), 0) FROM outbox`).Scan(&last); err != nil {
		st.Close(ctx)
		return buildStats{}, err
	}
	if err := st.MarkPublishedThrough(ctx, last); err != nil {
		st.Close(ctx)
		return buildStats{}, err
	}
	// And the relay has pruned what is older than publish.retention (its
	// default, 7 days), as it does every hour: else the daemon measured on
	// this database would spend its first seconds deleting them.
	if _, err := st.PruneOutbox(ctx, cfg.Start.Add(cfg.Span).Add(-outboxRetention)); err != nil {
		st.Close(ctx)
		return buildStats{}, err
	}
	if err := st.Close(ctx); err != nil {
		return buildStats{}, err
	}
	stats.Elapsed = time.Since(t0)
	return stats, nil
}

// buildBusy builds a busy day's last minutes through the store's write
// path with the real clock: size orders, each arriving as one webhook in
// its final status (distinct bodies, created as they arrive), applied by
// many callers at once, then every body delivered once more
// (byte-identical repeats, as a provider retrying deliveries it thinks
// lost). It returns, besides what it did, when the first and the last
// distinct order arrived. Every event is marked published: the relay
// keeps up with this rate (see make bench-daemon).
func buildBusy(ctx context.Context, path string, size, workers int, progress io.Writer) (buildStats, time.Time, time.Time, error) {
	st, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		return buildStats{}, time.Time{}, time.Time{}, err
	}
	t0 := time.Now()
	created := make([]int64, size) // unix ms: a repeat's body is its first's
	var (
		applies  atomic.Int64
		firstErr error
		errOnce  sync.Once
	)
	fail := func(err error) { errOnce.Do(func() { firstErr = err }) }
	// pass applies next(i), a body and its time, for every i by workers
	// callers, which generate the bodies too.
	pass := func(name string, next func(i int, now time.Time) []byte) {
		var (
			taken atomic.Int64
			wg    sync.WaitGroup
		)
		for range max(workers, 1) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(taken.Add(1) - 1)
					if i >= size || ctx.Err() != nil {
						return
					}
					now := time.Now()
					ob, err := observation(next(i, now), now)
					if err == nil {
						_, err = st.Apply(ctx, ob)
					}
					if err != nil {
						fail(err)
						return
					}
					applies.Add(1)
					if progress != nil && i > 0 && i%100_000 == 0 {
						fmt.Fprintf(progress, "%s: %d in %s\n", name, i, time.Since(t0).Round(time.Second))
					}
				}
			}()
		}
		wg.Wait()
	}
	pass("busy day, distinct webhooks", func(i int, now time.Time) []byte {
		created[i] = now.UnixMilli()
		return webhookBody(i, orderStatus(i), now, false)
	})
	first, last := time.UnixMilli(slices.Min(created)).UTC(), time.UnixMilli(slices.Max(created)).UTC()
	if firstErr == nil && ctx.Err() == nil {
		pass("busy day, repeats", func(i int, _ time.Time) []byte {
			return webhookBody(i, orderStatus(i), time.UnixMilli(created[i]), false)
		})
	}
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	if firstErr != nil {
		st.Close(ctx)
		return buildStats{}, first, last, firstErr
	}
	var seq int64
	if err := st.DB().QueryRowContext(ctx, `SELECT coalesce(max(seq), 0) FROM outbox`).Scan(&seq); err != nil {
		st.Close(ctx)
		return buildStats{}, first, last, err
	}
	if err := st.MarkPublishedThrough(ctx, seq); err != nil {
		st.Close(ctx)
		return buildStats{}, first, last, err
	}
	if err := st.Close(ctx); err != nil {
		return buildStats{}, first, last, err
	}
	return buildStats{Applies: applies.Load(), Elapsed: time.Since(t0)}, first, last, nil
}

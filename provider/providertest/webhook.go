package providertest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"slices"
	"time"

	"orderd/provider"
)

// WebhookKind says why a webhook was sent.
type WebhookKind string

// Webhook kinds.
const (
	// WebhookFinal is the spec's webhook: the order reached a final status.
	WebhookFinal WebhookKind = "final"
	// WebhookRefund is the order sent again because one of its refunds
	// reached a final status (Options.RefundWebhooks).
	WebhookRefund WebhookKind = "refund"
	// WebhookDuplicate is a second delivery of the same body
	// (Options.DuplicateWebhooks).
	WebhookDuplicate WebhookKind = "duplicate"
	// WebhookStale is the order's older, processing state delivered after
	// its final one (Options.OutOfOrder).
	WebhookStale WebhookKind = "stale"
)

// WebhookAttempt records one HTTP attempt to deliver a webhook.
type WebhookAttempt struct {
	// Delivery numbers the logical delivery (from 1); its retries share it.
	Delivery        int
	Kind            WebhookKind
	MerchantOrderID string
	// OrderStatus is the order status the body carries.
	OrderStatus provider.Status
	URL         string
	// Body is the exact bytes sent; it is shared, do not modify it.
	Body      []byte
	Signature string
	// Attempt is 1 for the first try, 2 for the first retry, and so on.
	Attempt int
	// Status is the receiver's HTTP status, 0 when there was none.
	Status int
	// Err describes a network fault or timeout, "" otherwise.
	Err string
	// Delay is how long the server waited after the previous attempt
	// before this one (zero for the first): the doubling retry delay.
	Delay time.Duration
	// At is the real time the attempt started.
	At time.Time
}

// OK reports whether the receiver accepted the attempt (HTTP 200).
func (a WebhookAttempt) OK() bool { return a.Status == http.StatusOK }

// Webhooks returns every webhook attempt so far, oldest first (at most
// Options.MaxRecords).
func (s *Server) Webhooks() []WebhookAttempt {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.webhooks)
}

// SetWebhookURLOverride sends every webhook to url instead of the order's
// webhookUrl; orders without a webhookUrl still get none. An empty url
// removes the override. Deliveries already scheduled keep their URL.
func (s *Server) SetWebhookURLOverride(url string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.override = url
}

// notifyLocked schedules the webhook for ord's current state. prev, when
// not nil, is the state before the change, delivered afterwards when
// Options.OutOfOrder asks for it.
func (s *Server) notifyLocked(ord *order, kind WebhookKind, prev []byte) {
	if ord.webhookURL == "" {
		return
	}
	url := ord.webhookURL
	if s.override != "" {
		url = s.override
	}
	body := renderOrder(&ord.o)
	duplicate := s.opts.DuplicateWebhooks > 0 && s.rng.Float64() < s.opts.DuplicateWebhooks
	var stale []byte
	if s.opts.OutOfOrder && kind == WebhookFinal && prev != nil {
		stale = prev
	}
	moid, status := ord.o.MerchantOrderID, ord.o.Status
	// Deliveries of one order go out one after another, in the order its
	// states happened; Options.OutOfOrder is the way to disturb that.
	prevDone, done := ord.delivered, make(chan struct{})
	ord.delivered = done
	s.goLocked(true, func() {
		defer close(done)
		if prevDone != nil {
			select {
			case <-prevDone:
			case <-s.ctx.Done():
				return
			}
		}
		s.deliver(url, body, kind, moid, status)
		if duplicate {
			s.deliver(url, body, WebhookDuplicate, moid, status)
		}
		if stale != nil {
			s.deliver(url, stale, WebhookStale, moid, provider.StatusProcessing)
		}
	})
}

// deliver posts body to url until the receiver answers 200, retrying with a
// doubling delay at most MaxWebhookRetries times. It gives up early when
// the server closes.
func (s *Server) deliver(url string, body []byte, kind WebhookKind, moid string, status provider.Status) bool {
	sig, err := Sign(s.key, body)
	if err != nil {
		s.log.Error("sign webhook", "merchantOrderId", moid, "err", err)
		return false
	}
	s.mu.Lock()
	s.deliveries++
	id := s.deliveries
	s.mu.Unlock()

	var waited time.Duration
	next := s.opts.WebhookBaseDelay
	for attempt := 1; attempt <= s.opts.MaxWebhookRetries+1; attempt++ {
		if attempt > 1 {
			if !s.sleep(next) {
				return false
			}
			waited, next = next, s.nextDelay(next)
		}
		at := time.Now()
		code, err := s.post(url, body, sig)
		rec := WebhookAttempt{
			Delivery: id, Kind: kind, MerchantOrderID: moid, OrderStatus: status, URL: url,
			Body: body, Signature: sig, Attempt: attempt, Status: code, Delay: waited, At: at,
		}
		if err != nil {
			rec.Err = err.Error()
		}
		s.mu.Lock()
		s.webhooks = appendBounded(s.webhooks, rec, s.opts.MaxRecords)
		s.mu.Unlock()
		s.log.Debug("webhook attempt", "merchantOrderId", moid, "kind", kind, "attempt", attempt,
			"status", code, "err", rec.Err, "elapsed", time.Since(at))
		if rec.OK() {
			return true
		}
		if s.ctx.Err() != nil {
			return false
		}
	}
	s.log.Info("webhook given up", "merchantOrderId", moid, "kind", kind, "attempts", s.opts.MaxWebhookRetries+1)
	return false
}

func (s *Server) nextDelay(d time.Duration) time.Duration {
	const ceiling = 365 * 24 * time.Hour
	if d < ceiling {
		d *= 2
	}
	if c := s.opts.MaxWebhookDelay; c > 0 && d > c {
		d = c
	}
	return d
}

// post makes one attempt and returns the HTTP status.
func (s *Server) post(url string, body []byte, sig string) (int, error) {
	ctx, cancel := context.WithTimeout(s.ctx, s.opts.WebhookTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Signature", sig)
	req.Header.Set("User-Agent", "providertest-webhook")
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, nil
}

// appendBounded appends v and drops the oldest entries beyond max.
func appendBounded[T any](list []T, v T, max int) []T {
	list = append(list, v)
	if over := len(list) - max; over > 0 {
		// Reslicing drops the oldest in O(1); the next append that
		// outgrows the array copies only the max kept into a new one,
		// so an append costs O(1) amortized, where shifting the whole
		// list each time cost O(max).
		list = list[over:]
	}
	return list
}

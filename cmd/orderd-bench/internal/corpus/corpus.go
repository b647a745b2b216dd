// Package corpus signs the webhooks orderd-bench's subcommands send: each a
// distinct completed payin, signed as the provider signs, all of them
// before the clock starts so that signing does not compete with the
// receiver for CPU while it is measured.
package corpus

import (
	"context"
	"crypto"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"orderd/provider/providertest"
)

// Webhook is one signed request ready to send: the Signature header's
// value and the body.
type Webhook struct {
	Sig  string
	Body []byte
}

// Sign signs n distinct completed payins with key on every CPU. Webhook i
// is providertest.LoadWebhook(tag, runID, base+i, now): the ids carry the
// tag, the run and the index, so no two calls with disjoint ranges, and no
// two runs, share an order.
func Sign(ctx context.Context, key crypto.Signer, tag string, runID uint32, base, n int) ([]Webhook, error) {
	out := make([]Webhook, n)
	now := time.Now().UTC().Truncate(time.Second)
	workers := runtime.GOMAXPROCS(0)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				if i%512 == 0 && ctx.Err() != nil {
					errs[w] = ctx.Err()
					return
				}
				body := providertest.LoadWebhook(tag, runID, base+i, now)
				sig, err := providertest.Sign(key, body)
				if err != nil {
					errs[w] = err
					return
				}
				out[i] = Webhook{Sig: sig, Body: body}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("sign the webhooks: %w", err)
	}
	return out, nil
}

// NewRunID is a random prefix for a run's order ids, so that runs against
// the same database never collide.
func NewRunID() (uint32, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return 0, fmt.Errorf("run id: %w", err)
	}
	return binary.BigEndian.Uint32(b[:]), nil
}

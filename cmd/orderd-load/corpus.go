package main

import (
	"context"
	"crypto"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"
	"time"

	"orderd/provider/providertest"
)

// corpus is the signed bodies of a run: each a distinct completed payin.
type corpus struct {
	bodies [][]byte
	sigs   []string
}

// newCorpus signs n distinct order bodies on every CPU. The ids carry a
// random run prefix, so runs against the same database never collide.
func newCorpus(ctx context.Context, key crypto.Signer, n int) (*corpus, error) {
	var prefix [4]byte
	if _, err := rand.Read(prefix[:]); err != nil {
		return nil, fmt.Errorf("run prefix: %w", err)
	}
	runID := binary.BigEndian.Uint32(prefix[:])
	now := time.Now().UTC().Truncate(time.Second)
	c := &corpus{bodies: make([][]byte, n), sigs: make([]string, n)}
	workers := runtime.GOMAXPROCS(0)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				if i%1024 == 0 && ctx.Err() != nil {
					errs[w] = ctx.Err()
					return
				}
				body := orderBody(runID, i, now)
				sig, err := providertest.Sign(key, body)
				if err != nil {
					errs[w] = err
					return
				}
				c.bodies[i], c.sigs[i] = body, sig
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("sign bodies: %w", err)
		}
	}
	return c, nil
}

// orderBody is a completed payin in the provider's webhook shape, with an
// id and merchantOrderId unique to (runID, i) and an amount that varies.
func orderBody(runID uint32, i int, now time.Time) []byte {
	id := fmt.Sprintf("%08x-0000-4000-8000-%012x", runID, i)
	cents := 1000 + i%99000
	amount := fmt.Sprintf("%d.%02d", cents/100, cents%100)
	fee := cents * 2 / 100
	net := fmt.Sprintf("%d.%02d", (cents-fee)/100, (cents-fee)%100)
	created := now.Add(-2 * time.Minute).Format(time.RFC3339)
	completed := now.Format(time.RFC3339)
	return fmt.Appendf(nil, `{"id":%q,"merchantOrderId":"load-%08x-%d","type":"payin","createdAt":%q,`+
		`"status":"completed","rejectReason":null,"merchantSourceWallet":null,`+
		`"merchantTargetWallet":{"amount":%q,"currency":"brl"},"transactions":[{"id":"%s-tx","type":"payin",`+
		`"status":"completed","authorized":{"amount":%q,"currency":"brl"},"merchantWallet":{"amount":%q,"currency":"brl"},`+
		`"counterpartyInfo":null,"paymentInfo":null,"createdAt":%q,"completedAt":%q,"rejectReason":null}]}`,
		id, runID, i, created, net, id, amount, net, created, completed)
}

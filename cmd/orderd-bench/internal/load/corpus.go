package load

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
				body := providertest.LoadWebhook("load", runID, i, now)
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

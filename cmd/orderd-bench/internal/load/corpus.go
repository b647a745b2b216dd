package load

import (
	"context"
	"crypto"

	signed "orderd/cmd/orderd-bench/internal/corpus"
)

// corpus is the signed bodies of a run: each a distinct completed payin.
type corpus struct {
	bodies [][]byte
	sigs   []string
}

// newCorpus signs n distinct order bodies on every CPU. The ids carry a
// random run prefix, so runs against the same database never collide.
func newCorpus(ctx context.Context, key crypto.Signer, n int) (*corpus, error) {
	runID, err := signed.NewRunID()
	if err != nil {
		return nil, err
	}
	webhooks, err := signed.Sign(ctx, key, "load", runID, 0, n)
	if err != nil {
		return nil, err
	}
	c := &corpus{bodies: make([][]byte, n), sigs: make([]string, n)}
	for i, w := range webhooks {
		c.bodies[i], c.sigs[i] = w.Body, w.Sig
	}
	return c, nil
}

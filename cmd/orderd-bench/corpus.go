package main

import (
	"bufio"
	"context"
	"crypto"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"orderd/cmd/orderd-bench/internal/cli"
	"orderd/cmd/orderd-bench/internal/corpus"
	"orderd/provider/providertest"
)

// corpusSet is where the signed requests of a run are: for each set (a
// daemon round, the profile round), one file per wrk thread, named
// <prefix>-<shard>.txt, each line a Signature value, a tab and a body.
type corpusSet struct {
	prefix string
	shards int
	count  int
}

// writeCorpus signs n distinct completed payins with key and writes them
// as shards files under prefix, request j in shard j mod shards. Ids carry
// runID and the set's base, so no two sets, and no two runs against the
// same database, share an order.
func writeCorpus(ctx context.Context, key crypto.Signer, prefix string, runID uint32, base, n, shards int) (corpusSet, error) {
	webhooks, err := corpus.Sign(ctx, key, "bench", runID, base, n)
	if err != nil {
		return corpusSet{}, err
	}
	for s := range shards {
		name := fmt.Sprintf("%s-%d.txt", prefix, s)
		f, err := os.Create(name)
		if err != nil {
			return corpusSet{}, fmt.Errorf("write the corpus: %w", err)
		}
		bw := bufio.NewWriterSize(f, 1<<20)
		for i := s; i < n; i += shards {
			_, _ = bw.WriteString(webhooks[i].Sig)
			_ = bw.WriteByte('\t')
			_, _ = bw.Write(webhooks[i].Body)
			_ = bw.WriteByte('\n')
		}
		err = bw.Flush()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return corpusSet{}, fmt.Errorf("write the corpus: %w", err)
		}
	}
	return corpusSet{prefix: prefix, shards: shards, count: n}, nil
}

// freshKey writes a new RSA-2048 key pair into dir and returns the key and
// the public key's path.
func freshKey(dir string) (crypto.Signer, string, error) {
	key, pubPEM, err := providertest.GenerateKey(providertest.KeyRSA)
	if err != nil {
		return nil, "", err
	}
	privPEM, err := providertest.PrivateKeyPEM(key)
	if err != nil {
		return nil, "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "bench-key.pem"), privPEM, 0o600); err != nil {
		return nil, "", fmt.Errorf("write the key: %w", err)
	}
	pub := filepath.Join(dir, "bench-key.pem.pub")
	if err := os.WriteFile(pub, pubPEM, 0o644); err != nil {
		return nil, "", fmt.Errorf("write the public key: %w", err)
	}
	return key, pub, nil
}

// loadKey reads the -key file (see providertest.LoadKey).
func loadKey(path string) (crypto.Signer, error) {
	k, err := providertest.LoadKey(path)
	if err != nil {
		return nil, cli.Usagef("-key: %v", err)
	}
	return k, nil
}

// corpusMeta describes the corpus a -reuse work directory holds, so that a
// later run with the same shape can use it instead of signing again.
type corpusMeta struct {
	Rounds   int `json:"rounds"`
	PerRound int `json:"per_round"`
	Shards   int `json:"shards"`
	ProfileN int `json:"profile_n"`
	RateN    int `json:"rate_n"`
}

func writeCorpusMeta(dir string, m corpusMeta) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "corpus.json"), b, 0o644)
}

// sameCorpus reports whether dir holds a key and a corpus of shape m.
func sameCorpus(dir string, m corpusMeta) bool {
	b, err := os.ReadFile(filepath.Join(dir, "corpus.json"))
	if err != nil {
		return false
	}
	var have corpusMeta
	if json.Unmarshal(b, &have) != nil {
		return false
	}
	if m.ProfileN == 0 {
		have.ProfileN = 0 // a run without profiles leaves the profile set alone
	}
	if m.RateN == 0 {
		have.RateN = 0
	}
	if have != m {
		return false
	}
	_, err = os.Stat(filepath.Join(dir, "bench-key.pem"))
	return err == nil
}

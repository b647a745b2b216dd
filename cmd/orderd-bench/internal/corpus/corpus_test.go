package corpus

import (
	"context"
	"testing"

	"orderd/provider"
	"orderd/provider/providertest"
)

// TestSign_verifies checks every signed webhook against the key's public
// half with the receiver's verifier, and that the ids are distinct.
func TestSign_verifies(t *testing.T) {
	key, _, err := providertest.GenerateKey(providertest.KeyRSA)
	if err != nil {
		t.Fatal(err)
	}
	v, err := provider.NewVerifier(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	ws, err := Sign(t.Context(), key, "test", 7, 100, 40)
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 40 {
		t.Fatalf("got %d webhooks, want 40", len(ws))
	}
	seen := map[string]bool{}
	for i, w := range ws {
		if err := v.Verify(w.Body, w.Sig); err != nil {
			t.Fatalf("webhook %d does not verify: %v", i, err)
		}
		if seen[string(w.Body)] {
			t.Fatalf("webhook %d repeats a body", i)
		}
		seen[string(w.Body)] = true
	}
}

func TestSign_cancelled(t *testing.T) {
	key, _, err := providertest.GenerateKey(providertest.KeyRSA)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Sign(ctx, key, "test", 7, 0, 10); err == nil {
		t.Fatal("Sign with a cancelled context succeeded")
	}
}

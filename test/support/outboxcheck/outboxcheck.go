// Package outboxcheck holds one test check shared by the packages whose
// tests drive orderd's code to queue events: every event in a store's
// outbox, encoded as the relay would publish it, must match the AsyncAPI
// document as published. One copy keeps those packages holding events to
// the same contract in the same way.
package outboxcheck

import (
	"context"
	"sync"
	"testing"
	"time"

	"orderd/api"
	"orderd/publish"
	"orderd/store"
	"orderd/test/support/eventschema"
)

var (
	once      sync.Once
	schemas   *eventschema.Validator
	schemaErr error
)

// Check encodes every event in st's outbox as the relay would publish it
// and checks it against the AsyncAPI document as published. The document
// is parsed once per test binary.
func Check(t testing.TB, st *store.Store) {
	t.Helper()
	once.Do(func() { schemas, schemaErr = eventschema.New(api.AsyncAPI(), eventschema.Published) })
	if schemaErr != nil {
		t.Fatalf("asyncapi document: %v", schemaErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	evs, err := st.PendingEvents(ctx, 0, 100000)
	if err != nil {
		t.Errorf("check events: %v", err)
		return
	}
	for _, ev := range evs {
		_, payload, err := publish.EncodeEvent(ev, publish.DefaultPrefix, "orderd", publish.DefaultSchemaURL)
		if err != nil {
			t.Errorf("encode %s: %v", ev.Type, err)
			continue
		}
		if _, err := schemas.Check(payload); err != nil {
			t.Errorf("event %s does not match the asyncapi document: %v", ev.ID, err)
		}
	}
}

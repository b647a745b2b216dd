package main

import (
	"context"
	"fmt"
	"time"
)

// natsReady is the "nats" readiness check: the connection has not been
// down for longer than nats.unreachable_ready_after, and the embedded
// server's JetStream, when orderd runs one, can store events (a full disk
// leaves its stream refusing writes until the watchdog restarts it).
func (d *daemon) natsReady(context.Context) error {
	if err := d.connSt.Ready(d.cfg.NATS.UnreachableReadyAfter); err != nil {
		return err
	}
	if d.embedded != nil {
		if err := d.embedded.JetStreamErr(); err != nil {
			return fmt.Errorf("embedded nats cannot store events: %w", err)
		}
	}
	return nil
}

// outboxReady is the "outbox" readiness check of the instance that
// publishes: events are getting out. It fails once the oldest unpublished
// event has waited longer than nats.unreachable_ready_after, whatever the
// reason (NATS unreachable, a stream refusing writes, the relay failing),
// so that readiness never says ok while events pile up.
func (d *daemon) outboxReady(ctx context.Context) error {
	oldest, pending, err := d.store.OldestUnpublished(ctx)
	if err != nil || !pending {
		return err
	}
	limit := d.cfg.NATS.UnreachableReadyAfter
	if age := d.now().Sub(oldest); age >= limit {
		return fmt.Errorf("the oldest unpublished event has waited %s (since %s), longer than nats.unreachable_ready_after (%s): events are not getting out",
			age.Round(time.Second), oldest.Format(time.RFC3339), limit)
	}
	return nil
}

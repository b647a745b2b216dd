package publish

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
)

// Stop shuts the publishing side down in the one order that loses nothing
// and leaves nothing running; any argument may be nil. The caller has
// already stopped taking webhooks and cancelled Relay.Run (and waited for it),
// and closes the database only after Stop returns, because the flush still
// reads and marks outbox rows.
//
//  1. Flush the relay within ctx: events committed before shutdown go out now
//     rather than at the next start (they are safe in the outbox either way).
//  2. Drain the connection: pending acks and subscriptions finish, then it
//     closes. If ctx ends first the connection is closed at once.
//  3. Stop the embedded server, after its last client is gone, so that its
//     files are synced and closed cleanly.
//
// The errors of all steps are joined; a failed step does not skip the next.
func Stop(ctx context.Context, r *Relay, nc *nats.Conn, e *Embedded) error {
	var errs []error
	if r != nil {
		if err := r.Flush(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if nc != nil {
		if err := drain(ctx, nc); err != nil {
			errs = append(errs, err)
		}
	}
	if e != nil {
		e.Shutdown()
	}
	return errors.Join(errs...)
}

func drain(ctx context.Context, nc *nats.Conn) error {
	if nc.IsClosed() {
		return nil
	}
	closed := nc.StatusChanged(nats.CLOSED)
	defer nc.RemoveStatusListener(closed)
	if err := nc.Drain(); err != nil {
		// Drain refuses a connection that is not connected (for
		// example during an outage): nothing to drain, just close.
		nc.Close()
		return nil
	}
	select {
	case <-closed:
		return nil
	case <-ctx.Done():
		nc.Close()
		return fmt.Errorf("drain nats connection: %w", ctx.Err())
	}
}

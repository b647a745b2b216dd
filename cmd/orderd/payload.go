package main

import (
	"fmt"

	"orderd/publish"
)

// webhookBodyLimit is the receiver's body limit: receiver.max_body_bytes,
// or less when the NATS server orderd is connected to at start-up could not
// carry the event of so large a webhook. A body of B bytes makes an event
// of up to B+publish.EventOverhead bytes; with an external server's
// default max_payload (1 MB) and the default max_body_bytes (1 MiB) a legal
// webhook's event would never be published. The limit is then lowered, and
// the log says so with the numbers to change; a larger webhook is answered
// 413. An event too large for a server met later is set aside by the relay
// with an event_not_published finding.
func (d *daemon) webhookBodyLimit() (int64, error) {
	limit := int64(d.cfg.Receiver.MaxBodyBytes)
	if d.nc == nil || !d.nc.IsConnected() {
		return limit, nil
	}
	maxPayload := d.nc.MaxPayload()
	fit := maxPayload - publish.EventOverhead
	if limit <= fit {
		return limit, nil
	}
	if fit < 64<<10 {
		return 0, fmt.Errorf("the NATS server at %s takes messages of at most %d bytes (max_payload): too small for orderd's events; raise it to at least %d",
			d.natsURL, maxPayload, limit+publish.EventOverhead)
	}
	d.log.Warn(fmt.Sprintf("receiver.max_body_bytes is %d, but the NATS server takes messages of at most %d bytes (its max_payload) "+
		"and an event carries the body and up to %d bytes more: webhooks over %d bytes are refused with 413, so that every accepted "+
		"webhook's event can be published; raise max_payload on the server to at least %d, or lower receiver.max_body_bytes",
		limit, maxPayload, publish.EventOverhead, fit, limit+publish.EventOverhead),
		"component", "receiver", "nats", d.natsURL, "max_payload", maxPayload, "max_body_bytes", fit)
	return fit, nil
}

// Package publish owns everything between orderd's outbox and NATS
// JetStream.
//
// The store appends an event to its outbox in the same transaction that
// changes an order, and the Relay is the only thing that publishes: it reads
// unpublished events in sequence order, publishes each as a CloudEvents 1.0
// JSON event (EncodeEvent) on "<prefix>.<subject>" with the Nats-Msg-Id
// header set to the event's deterministic id, waits for JetStream's ack and
// only then moves the outbox's cursor past the event (once per batch of
// acknowledgements: everything up to the cursor is published or set
// aside). Every committed change therefore
// reaches NATS at least once, in order per order, across NATS outages and
// orderd restarts, while JetStream's duplicate window drops the second copy
// a retry or a restart sends. NATS never holds up ingest: the outbox is the
// buffer. Runs of pending events go as JetStream atomic batches where the
// server allows them, so that an embedded server fsyncing every write
// (SyncAlways) stores a batch with one fsync rather than one per event.
//
// The package also provisions the stream (EnsureStream), connects to an
// external NATS server or cluster with unlimited reconnects (Connect),
// runs an embedded nats-server for the default single-machine setup
// (StartEmbedded), prints events for debugging (Tail), and shuts all of it
// down in the right order (Stop).
package publish

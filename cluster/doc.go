// Package cluster runs orderd replicated on a NATS JetStream cluster: a
// replicated state machine whose log is a JetStream stream.
//
// Every store write is a store.Command. A Node is the store's Log: it
// encodes the commands of concurrent callers into one log entry (group
// commit), appends it to the log stream and answers each caller once its
// own applier has applied that entry, so a caller's 200 means a quorum of
// NATS servers holds the write. Every instance's applier reads the log in
// order and applies each entry through store.ApplyLog, which records the
// applied sequence in the same transaction: every instance derives the
// same database from the same log.
//
// One instance holds a lease in a JetStream KV bucket and alone runs the
// duties given to Start (the outbox relay, the reconcile jobs, scheduled
// reports). A leader that cannot renew stops its duties before its lease
// can have ended anywhere else; Leading is the gate those duties check
// before each action with outside effects. The leader also writes
// snapshots of its database to a JetStream object store, from which an
// instance with an empty disk starts (RestoreSnapshot).
//
// orderd adds no consensus of its own: ordering, quorum and failover of
// the log, the lease and the snapshots are JetStream's.
package cluster

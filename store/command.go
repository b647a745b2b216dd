package store

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"time"

	"orderd/internal/telemetry"
)

// A Command is one write to the store, described by data alone: its
// fields say everything Apply needs besides the database and the op's
// time. In single-node mode a command runs in the writer's transaction at
// once; in replicated mode it is encoded into the replicated log and every
// instance applies it, so Apply must be deterministic: it reads only the
// transaction (tx.Now is the op's time, never the wall clock), draws row
// ids only through the Tx, and does nothing outside the transaction.
//
// Every write method of the Store is a command. Other packages may define
// their own (the reconciler does) and must register them with
// RegisterCommand so that the log can decode them.
type Command interface {
	// Kind names the command in the log; unique across the program.
	Kind() string
	// Apply runs the command in tx and returns its result. An error rolls
	// back the command's effects (and only them).
	Apply(tx *Tx) (any, error)
}

// rerunnable marks a command whose Apply may run more than once in one
// batch (the writer's fast path, see runBatch): it has no effect outside
// the transaction but its returned result.
type rerunnable interface{ rerunnable() }

var (
	registryMu sync.RWMutex
	registry   = map[string]func() Command{}
)

// RegisterCommand makes a command kind decodable from the log. newCmd
// returns a pointer to a zero command of that kind, which the log's JSON
// is decoded into. Registering a kind twice panics.
func RegisterCommand(kind string, newCmd func() Command) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[kind]; dup {
		panic("store: command kind registered twice: " + kind)
	}
	registry[kind] = newCmd
}

// NewCommand returns an empty command of kind, as decoding makes it.
func NewCommand(kind string) (Command, bool) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	f, ok := registry[kind]
	if !ok {
		return nil, false
	}
	return f(), true
}

// CommandKinds returns the registered command kinds, sorted.
func CommandKinds() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	kinds := make([]string, 0, len(registry))
	for k := range registry {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	return kinds
}

// Op is a command with the time it was issued: the time its effects
// record on every instance.
type Op struct {
	At  time.Time
	Cmd Command
	// Trace is the W3C traceparent of the caller's span, for the events
	// the command queues. It is not part of the entry's bytes (EncodeOps
	// leaves it out, so entry hashes and links are unchanged): the log
	// carries it beside them, and it changes no replicated state.
	Trace string
}

// OpResult is what applying one op gave: Apply's result and error.
type OpResult struct {
	Value any
	Err   error
}

// Log is where a replicated store sends its commands: Execute appends ops
// to the replicated log, waits until this instance has applied them (by
// calling ApplyLog) and returns their results, in order. An error means
// the ops' fate is unknown to the caller (not appended, or appended and
// not yet applied here); ErrUnavailable wraps a log that cannot be
// reached.
type Log interface {
	Execute(ctx context.Context, ops []Op) ([]OpResult, error)
}

// ErrUnavailable is returned for a write in replicated mode when the
// replicated log cannot take it now (no quorum, not connected). Nothing of
// the write is known to be recorded; the caller answers 503.
var ErrUnavailable = errors.New("store: replicated log unavailable")

// Replicate routes every command through log instead of writing it here
// directly: the replicated mode. Call it once, before the store is used
// for writes. Store.Write (an arbitrary function, not a command) then
// fails with ErrNotReplicable.
func (s *Store) Replicate(log Log) { s.replog = log }

// Replicated reports whether the store's writes go through a log.
func (s *Store) Replicated() bool { return s.replog != nil }

// ErrNotReplicable is returned by Store.Write in replicated mode.
var ErrNotReplicable = errors.New("store: a write that is not a command cannot be replicated")

// Exec runs one command: in single-node mode in the writer's transaction,
// in replicated mode through the log. It returns after the command's
// effects are durable (committed here, or accepted by the log's quorum and
// applied here).
func (s *Store) Exec(ctx context.Context, cmd Command) (any, error) {
	at := s.now()
	trace := telemetry.Traceparent(ctx)
	if s.replog != nil {
		res, err := s.replog.Execute(ctx, []Op{{At: at, Cmd: cmd, Trace: trace}})
		if err != nil {
			return nil, err
		}
		if len(res) != 1 {
			return nil, fmt.Errorf("store: log answered %d results for one op", len(res))
		}
		return res[0].Value, res[0].Err
	}
	var v any
	_, rr := cmd.(rerunnable)
	err := s.write(ctx, func(tx *Tx) error {
		tx.now, tx.trace = at, trace
		var err error
		v, err = cmd.Apply(tx)
		tx.trace = ""
		return err
	}, rr)
	if errors.Is(err, ErrUnconfirmed) {
		// ctx ended while the writer was running the command, which may
		// still be setting v: it is not ours to read.
		return nil, err
	}
	return v, err
}

// Executor runs commands: the Store, or what stands for it in a package
// that declares its own interface.
type Executor interface {
	Exec(ctx context.Context, cmd Command) (any, error)
}

// ExecAs is Exec with the result's type asserted. On an error it still
// returns the result when the command gave one of type T (a count of what
// it did before failing, say).
func ExecAs[T any](ctx context.Context, s Executor, cmd Command) (T, error) {
	var zero T
	v, err := s.Exec(ctx, cmd)
	t, ok := v.(T)
	if err != nil {
		if ok {
			return t, err
		}
		return zero, err
	}
	if !ok && v != nil {
		return zero, fmt.Errorf("store: %s answered %T", cmd.Kind(), v)
	}
	return t, nil
}

// Versions of the log entry, its first byte. Version 2 carries every
// command as JSON; version 3 says per op how its command is coded: as
// JSON, or in the command's own binary form. Version 4 is framed as 3 and
// may carry the command kinds that came with it (VersionedCommand).
// Version 5 is framed as 3 too and may carry a webhook's observation with
// its body alone (observe.3: every instance reads the order from the body,
// as the receiver did). All decode, so an entry keeps the meaning it was
// written with.
const (
	logVersionJSON     = 2
	logVersionCodecs   = 3
	logVersionKinds4   = 4
	logVersionBodyOnce = 5
)

// VersionedCommand is a command whose kind came with a later log version
// than the oldest: it may be written only at LogVersion or later. At an
// earlier version the entry carries Before instead, the same write under
// the older kind and its rules, which every release that reads that
// version applies alike.
type VersionedCommand interface {
	Command
	// LogVersion is the first log version that may carry this kind.
	LogVersion() int
	// Before is the command as a log version before LogVersion carries
	// it.
	Before() Command
}

// AtLogVersion is cmd as an entry of log version v carries it.
func AtLogVersion(cmd Command, v int) Command {
	for {
		vc, ok := cmd.(VersionedCommand)
		if !ok || vc.LogVersion() <= v {
			return cmd
		}
		cmd = vc.Before()
	}
}

// The log versions this orderd reads, and so may write: an entry of any
// version in [OldestLogVersion, NewestLogVersion] decodes. Which one an
// instance writes is the cluster's to say (cluster: the version in force,
// raised only once every instance that follows the log reads it).
const (
	OldestLogVersion = logVersionJSON
	NewestLogVersion = logVersionBodyOnce
)

// LogVersionError is an entry of a version this orderd does not read.
type LogVersionError struct {
	Version byte
}

func (e *LogVersionError) Error() string {
	return fmt.Sprintf("log entry: version %d, which this orderd does not read (it reads %d to %d): a newer orderd wrote it",
		e.Version, OldestLogVersion, NewestLogVersion)
}

// Codecs of an op's command in a version 3 entry.
const (
	codecJSON   = 0
	codecBinary = 1
)

// binaryCommand is a command with a compact binary form, for the commands
// the log carries most (a webhook's observation): written and read without
// JSON's reflection, escaping and base64, once per entry on the answering
// instance and once per instance that applies it. decodeBinary must accept
// exactly what appendBinary writes and give a command that applies alike.
type binaryCommand interface {
	Command
	appendBinary(b []byte) ([]byte, error)
	decodeBinary(b []byte) error
}

// EncodeOps encodes ops as one log entry: a version byte, then for each op
// its time (Unix nanoseconds, varint), its kind (length-prefixed), its
// command's codec (one byte) and the command so coded (length-prefixed).
func EncodeOps(ops []Op) ([]byte, error) {
	return EncodeOpsAt(ops, NewestLogVersion)
}

// EncodeOpsAt encodes ops as one log entry of version: version 2 codes
// every command as JSON (and has no codec byte), versions 3 to 5 as
// EncodeOps says; a command whose kind came with a later version is
// written as that version carries it (AtLogVersion). All apply alike.
func EncodeOpsAt(ops []Op, version int) ([]byte, error) {
	if version < OldestLogVersion || version > NewestLogVersion {
		return nil, fmt.Errorf("encode: log version %d: this orderd writes %d to %d", version, OldestLogVersion, NewestLogVersion)
	}
	b := make([]byte, 1, 1600*len(ops))
	b[0] = byte(version)
	var scratch []byte
	for _, op := range ops {
		op.Cmd = AtLogVersion(op.Cmd, version)
		kind := op.Cmd.Kind()
		b = binary.AppendVarint(b, op.At.UnixNano())
		b = binary.AppendUvarint(b, uint64(len(kind)))
		b = append(b, kind...)
		var cmd []byte
		var err error
		if bc, ok := op.Cmd.(binaryCommand); ok && version >= logVersionCodecs {
			b = append(b, codecBinary)
			scratch, err = bc.appendBinary(scratch[:0])
			cmd = scratch
		} else {
			if version >= logVersionCodecs {
				b = append(b, codecJSON)
			}
			cmd, err = json.Marshal(op.Cmd)
		}
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", kind, err)
		}
		b = binary.AppendUvarint(b, uint64(len(cmd)))
		b = append(b, cmd...)
	}
	return b, nil
}

// DecodeOps decodes a log entry of either version. An unknown version,
// codec or command kind is an error: an instance must not skip what it
// cannot apply.
func DecodeOps(b []byte) ([]Op, error) {
	if len(b) == 0 {
		return nil, errors.New("log entry: empty")
	}
	if b[0] < OldestLogVersion || b[0] > NewestLogVersion {
		return nil, &LogVersionError{Version: b[0]}
	}
	version := b[0]
	b = b[1:]
	var ops []Op
	field := func() ([]byte, error) {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return nil, errors.New("log entry: truncated")
		}
		f := b[k : k+int(n)]
		b = b[k+int(n):]
		return f, nil
	}
	registryMu.RLock()
	defer registryMu.RUnlock()
	for len(b) > 0 {
		at, k := binary.Varint(b)
		if k <= 0 {
			return nil, errors.New("log entry: truncated")
		}
		b = b[k:]
		kind, err := field()
		if err != nil {
			return nil, err
		}
		codec := byte(codecJSON)
		if version >= logVersionCodecs {
			if len(b) == 0 {
				return nil, errors.New("log entry: truncated")
			}
			codec, b = b[0], b[1:]
		}
		raw, err := field()
		if err != nil {
			return nil, err
		}
		newCmd, ok := registry[string(kind)]
		if !ok {
			return nil, fmt.Errorf("log entry: unknown command kind %q (a newer orderd wrote it?)", kind)
		}
		cmd := newCmd()
		switch codec {
		case codecJSON:
			err = json.Unmarshal(raw, cmd)
		case codecBinary:
			bc, ok := cmd.(binaryCommand)
			if !ok {
				return nil, fmt.Errorf("log entry: %s has no binary form (a newer orderd wrote it?)", kind)
			}
			err = bc.decodeBinary(raw)
		default:
			return nil, fmt.Errorf("log entry: %s: unknown codec %d (a newer orderd wrote it?)", kind, codec)
		}
		if err != nil {
			return nil, fmt.Errorf("log entry: %s: %w", kind, err)
		}
		ops = append(ops, Op{At: time.Unix(0, at).UTC(), Cmd: cmd})
	}
	if len(ops) == 0 {
		return nil, errors.New("log entry: no ops")
	}
	return ops, nil
}

// The store's own commands.
func init() {
	for _, c := range []Command{
		&observeCmd{}, &observeBodyCmd{}, &quarantineCmd{}, &watchCmd{},
		&beginAttemptCmd{}, &finishAttemptCmd{}, recoverPendingCmd{}, &settleCreatedCmd{},
		&settleNotCreatedCmd{}, &postponeAttemptCmd{},
		&markPublishedCmd{}, &advanceOutboxCmd{}, &pruneOutboxCmd{}, &setAsideCmd{}, &requeueSetAsideCmd{},
		&startRunCmd{}, &finishRunCmd{}, &UpsertRequisitesCmd{}, &deactivateRequisiteCmd{},
		&requisiteSweptCmd{}, &balanceSnapshotCmd{}, &advanceLedgerCmd{},
		&OpenFindingCmd{}, &ResolveFindingsCmd{}, &FindingActionCmd{}, NoopCmd{},
	} {
		RegisterCommand(c.Kind(), newOf(c))
	}
	// Kinds whose rules changed keep their old rules for the entries
	// written with them.
	RegisterCommand((&finishAttemptCmd{legacy: true}).Kind(), func() Command { return &finishAttemptCmd{legacy: true} })
	RegisterCommand((&observeCmd{legacy: true}).Kind(), func() Command { return &observeCmd{legacy: true} })
	for _, rules := range []int{1, 2} {
		RegisterCommand((&settleCreatedCmd{rules: rules}).Kind(), func() Command { return &settleCreatedCmd{rules: rules} })
	}
}

// newOf returns a constructor of zero commands of c's type.
func newOf(c Command) func() Command {
	t := reflect.TypeOf(c)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return func() Command { return reflect.New(t).Interface().(Command) }
}

// NoopCmd changes nothing: a replicated log's probe (can an entry be
// appended and applied now?).
type NoopCmd struct{}

// Kind implements Command.
func (NoopCmd) Kind() string { return "noop" }

// Apply implements Command.
func (NoopCmd) Apply(*Tx) (any, error) { return nil, nil }

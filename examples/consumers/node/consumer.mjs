// An example of a platform consuming orderd's events from NATS JetStream
// with the official @nats-io/jetstream package: a durable pull consumer that
// handles every event once by its id, in order per order, acknowledges an
// event only after its work is done, survives its own restart, and can
// start from a point in time.
//
// The work here is appending a line to a ledger file (--ledger); a real
// platform would write to its database. The ledger is also the record of
// the ids already handled: read back at start, it makes a redelivered event
// (JetStream delivers at least once) a no-op. In a database, record the
// event id in the same transaction as the work, with a unique constraint.
//
//   npm ci && node consumer.mjs --server nats://127.0.0.1:4222
//   node consumer.mjs --durable replay --since 2026-11-27T00:00:00Z
//
// Before its work, each event's data is validated against the schema its
// dataschema attribute names (orderd's AsyncAPI document, fetched from the
// admin API, with ajv and ajv-formats; schema.mjs). An event that does not
// match stops the consumer without acknowledging it: a contract break is
// for a person to look at, not to be skipped (--no-validate turns this off).
//
// Each event prints one line: "handled seq=… id=… type=… subject=…" the
// first time, "duplicate seq=… id=…" when it comes again.
import { closeSync, existsSync, fsyncSync, openSync, readFileSync, truncateSync, writeSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { connect, nanos } from '@nats-io/transport-node';
import { Schemas } from './schema.mjs';
import { AckPolicy, DeliverPolicy, JetStreamApiCodes, JetStreamApiError, jetstream, jetstreamManager } from '@nats-io/jetstream';

const { values: opt } = parseArgs({
  options: {
    server: { type: 'string', default: 'nats://127.0.0.1:4222' },
    stream: { type: 'string', default: 'ORDERD' },
    durable: { type: 'string', default: 'example-node' },
    subject: { type: 'string', default: 'orderd.>' },
    ledger: { type: 'string', default: 'ledger-node.txt' },
    since: { type: 'string' }, // RFC 3339; used when the durable is created
    'ack-wait': { type: 'string', default: '30' }, // seconds
    'crash-after': { type: 'string', default: '0' }, // tests: exit after the Nth event's work, before its ack
    'no-validate': { type: 'boolean', default: false },
    'admin-token': { type: 'string', default: process.env.ORDERD_ADMIN_TOKEN ?? '' }, // to fetch the schema when the admin API has a token
  },
});
let since;
if (opt.since) {
  since = new Date(opt.since);
  if (Number.isNaN(since.getTime())) {
    console.error(`consumer: --since ${opt.since} is not a time (RFC 3339, e.g. 2026-11-27T00:00:00Z)`);
    process.exit(2);
  }
}
const crashAfter = Number(opt['crash-after']);
const ackWaitSeconds = Number(opt['ack-wait']);

// The ids already handled. A last line cut short by a crash is dropped: its
// event was not acknowledged, so it comes again.
const handled = new Set();
if (existsSync(opt.ledger)) {
  let text = readFileSync(opt.ledger, 'utf8');
  const end = text.lastIndexOf('\n') + 1;
  if (end < text.length) {
    truncateSync(opt.ledger, Buffer.byteLength(text.slice(0, end)));
    text = text.slice(0, end);
  }
  for (const line of text.split('\n')) {
    const id = line.split(' ')[0];
    if (id) handled.add(id);
  }
}
const ledger = openSync(opt.ledger, 'a');

const nc = await connect({ servers: opt.server, name: 'orderd example consumer (node)', maxReconnectAttempts: -1 });
const jsm = await jetstreamManager(nc);
const js = jetstream(nc);

// The durable consumer, created when it does not exist yet. max_ack_pending
// 1 keeps the events in stream order, and so in order per order, even
// across redeliveries: JetStream hands out nothing after an unacknowledged
// event until it is acknowledged.
// orderd creates the stream at its first publish; until then, wait.
for (let waited = false; ; waited = true) {
  try {
    await jsm.streams.info(opt.stream);
    break;
  } catch (err) {
    if (!(err instanceof JetStreamApiError) || err.code !== JetStreamApiCodes.StreamNotFound) throw err;
    if (!waited) console.log(`waiting for stream ${opt.stream}`);
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}
try {
  await jsm.consumers.info(opt.stream, opt.durable);
  if (since) {
    console.log(`durable ${opt.durable} exists and keeps its position; --since applies to a new one (another --durable, or nats consumer rm ${opt.stream} ${opt.durable})`);
  }
} catch (err) {
  if (!(err instanceof JetStreamApiError) || err.code !== JetStreamApiCodes.ConsumerNotFound) throw err;
  await jsm.consumers.add(opt.stream, {
    durable_name: opt.durable,
    ack_policy: AckPolicy.Explicit,
    ack_wait: nanos(ackWaitSeconds * 1000),
    max_ack_pending: 1,
    filter_subject: opt.subject,
    ...(since
      ? { deliver_policy: DeliverPolicy.StartTime, opt_start_time: since.toISOString() }
      : { deliver_policy: DeliverPolicy.All }),
  });
  console.log(`created durable ${opt.durable} on ${opt.stream} (${opt.subject})`);
}
const consumer = await js.consumers.get(opt.stream, opt.durable);
const messages = await consumer.consume({ max_messages: 1 });

let stopping = false;
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    stopping = true;
    messages.stop(); // the loop ends once the event in hand is done
  });
}

const schemas = opt['no-validate'] ? null : new Schemas({ token: opt['admin-token'] });
let n = 0;
for await (const m of messages) {
  const seq = m.info.streamSequence;
  let ev;
  try {
    ev = m.json();
  } catch {
    ev = {};
  }
  if (!ev.id) {
    console.log(`skipped seq=${seq} subject=${m.subject}: not a CloudEvent with an id`);
    m.term();
    continue;
  }
  if (schemas) {
    const errors = await schemas.validate(ev.dataschema, ev.data);
    if (errors) {
      console.log(`invalid seq=${seq} id=${ev.id} type=${ev.type}: ${errors}`);
      console.error(`consumer: event seq ${seq} does not match its dataschema ${ev.dataschema}; not acknowledged`);
      process.exit(1);
    }
  }
  if (handled.has(ev.id)) {
    console.log(`duplicate seq=${seq} id=${ev.id} type=${ev.type} (handled before; acknowledged again)`);
  } else {
    // The work, and the record that it is done, in one write.
    writeSync(ledger, `${ev.id} ${seq} ${ev.type} ${ev.subject}\n`);
    fsyncSync(ledger);
    handled.add(ev.id);
    n++;
    console.log(`handled seq=${seq} id=${ev.id} type=${ev.type} subject=${ev.subject}`);
    if (crashAfter > 0 && n === crashAfter) {
      console.log(`crashing before acknowledging seq=${seq}, as --crash-after asks`);
      process.exit(3);
    }
  }
  // Only now, with the work durable; ackAck waits for the server's reply.
  const acked = await m.ackAck();
  if (!acked && !stopping) {
    throw new Error(`ack of seq ${seq} was not confirmed`);
  }
  if (stopping) break;
}
closeSync(ledger);
await nc.drain();

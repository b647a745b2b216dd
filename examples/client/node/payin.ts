// An example of a platform using a client generated from orderd's OpenAPI
// document: openapi-typescript turns api/openapi.json into types
// (generated/orderd.d.ts, made by "npm run generate"), and openapi-fetch
// makes typed calls with them. The program
//
//   1. creates a payin through orderd's gateway (POST /v1/payins),
//   2. waits on NATS JetStream for the event orderd publishes for it,
//   3. reads the order back through the admin API
//      (GET /v1/orders/{merchantOrderId}) and checks that it agrees with
//      the event.
//
//   npm ci && npm run build
//   node dist/payin.js --admin http://127.0.0.1:8081 --nats nats://127.0.0.1:4222
//
// It prints one line per step ("created …", "event …", "order …") and exits
// 0, or 1 with the reason. Against "orderd sandbox" it needs no other
// flag; with an admin token, pass --token or set ORDERD_ADMIN_TOKEN.
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import createClient from 'openapi-fetch';
import { connect } from '@nats-io/transport-node';
import { DeliverPolicy, jetstream, jetstreamManager, JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import type { components, paths } from './generated/orderd.js';

const { values: opt } = parseArgs({
  options: {
    admin: { type: 'string', default: 'http://127.0.0.1:8081' },
    token: { type: 'string', default: process.env.ORDERD_ADMIN_TOKEN ?? '' },
    nats: { type: 'string', default: 'nats://127.0.0.1:4222' },
    stream: { type: 'string', default: 'ORDERD' },
    prefix: { type: 'string', default: 'orderd' }, // nats.subject_prefix
    'merchant-order-id': { type: 'string', default: `example-${randomUUID()}` },
    amount: { type: 'string', default: '25.00' },
    currency: { type: 'string', default: 'brl' },
    timeout: { type: 'string', default: '30' }, // seconds to wait for the event
  },
});
const merchantOrderId = opt['merchant-order-id'];

function fail(message: string): never {
  console.error(`payin: ${message}`);
  process.exit(1);
}

const orderd = createClient<paths>({
  baseUrl: opt.admin,
  headers: opt.token ? { Authorization: `Bearer ${opt.token}` } : {},
});

// 1. The payin, through the gateway. The attempt is stored before the
// provider is called; the same merchantOrderId sent again is answered from
// it (200), so a platform that is not sure its call arrived sends it again.
const startedAt = new Date(Date.now() - 1000); // the event comes after this
const created = await orderd.POST('/v1/payins', {
  body: {
    merchantOrderId,
    invoice: { amount: opt.amount, currency: opt.currency },
    client: { name: 'Example Customer' },
  },
});
if (created.error) {
  // The error's type is the union of the shapes the document declares for
  // the operation's error statuses: the gateway's rejection ({state, error:
  // {code, validationErrors}}) or a plain {error, field}.
  fail(`POST /v1/payins answered ${created.response.status}: ${JSON.stringify(created.error)}`);
}
const answer = created.data;
switch (answer.state) {
  case 'created':
    console.log(`created payin ${merchantOrderId}: HTTP ${created.response.status}, state created`);
    break;
  case 'in_doubt':
  case 'pending':
    // The provider may or may not have it; orderd settles it and publishes
    // the outcome, so waiting for the event is still right.
    console.log(`created payin ${merchantOrderId}: HTTP ${created.response.status}, state ${answer.state} (orderd settles it)`);
    break;
  default:
    fail(`POST /v1/payins answered ${created.response.status} with state ${answer.state}: ${JSON.stringify(answer)}`);
}

// 2. Its event: an ordered consumer (no state on the server) on the order
// subjects, from just before the creation, until an event of this order.
type OrderEvent = {
  id: string;
  type: string;
  subject: string;
  dataschema: string;
  merchantorderid?: string;
  learnedvia?: string;
  data: { status?: string };
};
const nc = await connect({ servers: opt.nats, name: 'orderd example client (node)' });
const js = jetstream(nc);
const jsm = await jetstreamManager(nc);
const deadline = Date.now() + Number(opt.timeout) * 1000;
// orderd creates the stream at its first publish, which may be this
// payin's event.
for (;;) {
  try {
    await jsm.streams.info(opt.stream);
    break;
  } catch (err) {
    if (!(err instanceof JetStreamApiError) || err.code !== JetStreamApiCodes.StreamNotFound) throw err;
    if (Date.now() > deadline) fail(`stream ${opt.stream} did not appear within ${opt.timeout}s`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}
const consumer = await js.consumers.get(opt.stream, {
  filter_subjects: [`${opt.prefix}.orders.payin.>`],
  deliver_policy: DeliverPolicy.StartTime,
  opt_start_time: startedAt.toISOString(),
});
const timer = setTimeout(() => fail(`no event for ${merchantOrderId} within ${opt.timeout}s`), deadline - Date.now());
let event: OrderEvent | undefined;
const messages = await consumer.consume();
for await (const m of messages) {
  const ev = m.json<OrderEvent>();
  if (ev.merchantorderid === merchantOrderId) {
    event = ev;
    console.log(`event ${ev.type} seq=${m.seq} id=${ev.id} subject=${m.subject} learnedvia=${ev.learnedvia} status=${ev.data.status}`);
    break;
  }
}
clearTimeout(timer);
await nc.drain();
if (!event) fail('the event stream ended before an event of the payin');

// 3. The order as orderd stores it.
const stored = await orderd.GET('/v1/orders/{merchantOrderId}', {
  params: { path: { merchantOrderId } },
});
if (stored.error) {
  fail(`GET /v1/orders/${merchantOrderId} answered ${stored.response.status}: ${JSON.stringify(stored.error)}`);
}
const order: components['schemas']['Order'] = stored.data;
const status = String(order.order.status);
console.log(`order ${merchantOrderId}: status ${status}, learned via ${order.learnedVia}, ${order.history.length} states, ${order.attempts.length} attempt(s)`);
// The stored order is at least as far along as the event: the same status,
// or a later one the provider has reported since.
if (!order.history.some((h) => h.status === event.data.status)) {
  fail(`the order's history (${order.history.map((h) => h.status).join(', ')}) lacks the event's status ${event.data.status}`);
}

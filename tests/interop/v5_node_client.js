// Drive RocketMQ 5's official Node.js client (npm rocketmq-client-nodejs 1.0.8) for the interop tests.
// Same JSON spec and output as v5_python_client.py (one argument in, one JSON line out).
'use strict';
const path = require('path');
const { Producer, SimpleConsumer, PushConsumer, ConsumeResult } = require(path.join(__dirname, 'node', 'node_modules', 'rocketmq-client-nodejs'));

function baseOptions(spec) {
  const opts = { endpoints: spec.endpoint, namespace: spec.namespace || '', requestTimeout: 5000 };
  if (spec.ak) opts.sessionCredentials = { accessKey: spec.ak, accessSecret: spec.sk };
  return opts;
}

function build(topic, m) {
  const msg = { topic, body: Buffer.from(m.body) };
  if (m.tag) msg.tag = m.tag;
  if (m.keys) msg.keys = m.keys;
  if (m.props) msg.properties = new Map(Object.entries(m.props));
  if (m.group) msg.messageGroup = m.group;
  if (m.delay_ms) msg.delay = m.delay_ms;
  return msg;
}

async function produce(spec) {
  const checked = [];
  const checker = { async check(view) { checked.push(view.messageId); return 1; } }; // COMMIT
  const producer = new Producer({ ...baseOptions(spec), topic: spec.topic, checker });
  await producer.startup();
  const sent = [];
  try {
    for (const m of spec.messages) {
      if (m.tx) {
        const tx = producer.beginTransaction();
        const receipt = await producer.send(build(spec.topic, m), tx);
        if (m.tx === 'commit') await tx.commit();
        else if (m.tx === 'rollback') await tx.rollback();
        sent.push({ message_id: receipt.messageId, transaction_id: receipt.transactionId });
      } else {
        const receipt = await producer.send(build(spec.topic, m));
        sent.push({ message_id: receipt.messageId, ...await recall(producer, spec.topic, m, receipt) });
      }
    }
    const want = spec.messages.filter(m => m.tx === 'check-commit').length;
    const deadline = Date.now() + 1000 * (spec.check_wait_s || 0);
    while (checked.length < want && Date.now() < deadline) await new Promise(r => setTimeout(r, 100));
    await new Promise(r => setTimeout(r, 1000 * (spec.linger_s || 0)));
  } finally {
    await producer.shutdown();
  }
  return { sent, checked };
}

// recall: "now" recalls a delay message at once (Producer.recallMessage, RocketMQ 5.3's RecallMessage);
// "late" once its delivery time has passed (the server must refuse: it is delivered).
async function recall(producer, topic, m, receipt) {
  if (!m.recall) return {};
  if (m.recall === 'late') await new Promise(r => setTimeout(r, (m.delay_ms || 0) + 1200));
  try {
    return { recalled: (await producer.recallMessage(topic, receipt.recallHandle)).messageId };
  } catch (err) {
    return { recall_error: String(err && err.message || err) };
  }
}

function view(msg) {
  return {
    body: msg.body.toString(),
    tag: msg.tag === undefined ? null : msg.tag,
    keys: [...msg.keys].sort(),
    props: Object.fromEntries(msg.properties),
    message_id: msg.messageId,
    group: msg.messageGroup === undefined ? null : msg.messageGroup,
    attempt: msg.deliveryAttempt,
    type: null,
    delivery_ms: msg.deliveryTimestamp ? msg.deliveryTimestamp.getTime() : null,
  };
}

async function consume(spec) {
  const consumer = new SimpleConsumer({
    ...baseOptions(spec),
    consumerGroup: spec.group,
    subscriptions: new Map().set(spec.topic, spec.tag || '*'),
    awaitDuration: 1000 * (spec.await_s || 5),
  });
  await consumer.startup();
  const received = [];
  const deadline = Date.now() + 1000 * (spec.timeout_s || 20);
  let changed = false;
  try {
    while (received.length < spec.expect && Date.now() < deadline) {
      const messages = await consumer.receive(32, 1000 * (spec.invisible_s || 15));
      for (const msg of messages) {
        received.push(view(msg));
        if (spec.change_first_s && !changed) {
          await consumer.changeInvisibleDuration(msg, 1000 * spec.change_first_s);
          changed = true;
        }
        if (spec.ack !== false) await consumer.ack(msg);
      }
    }
  } finally {
    await consumer.shutdown();
  }
  return { received };
}

async function push(spec) {
  const received = [];
  const consumer = new PushConsumer({
    ...baseOptions(spec),
    consumerGroup: spec.group,
    subscriptions: new Map([[spec.topic, spec.tag || '*']]),
    messageListener: { async consume(view) { received.push(view); return ConsumeResult.SUCCESS; } },
  });
  await consumer.startup();
  const deadline = Date.now() + 1000 * (spec.timeout_s || 20);
  while (received.length < spec.expect && Date.now() < deadline) await new Promise(r => setTimeout(r, 50));
  await consumer.shutdown();
  return { received: received.map(view) };
}

(async () => {
  const spec = JSON.parse(process.argv[2]);
  const actions = { produce, consume, push };
  const out = await actions[spec.action](spec);
  process.stdout.write(JSON.stringify(out) + '\n');
  process.exit(0);
})().catch(err => {
  process.stderr.write(String(err && err.stack || err) + '\n');
  process.exit(1);
});

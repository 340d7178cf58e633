// ali-ons 3.12 (npm) against tidemq: a message sent with setStartDeliverTime(now + delay) must reach
// an ali-ons push consumer no earlier than that time. Usage: node ali_ons_timer.js <namesrv> <topic> <delay ms>
// (the topic must exist: ali-ons does not auto-create it). Prints one JSON line: {"warm": ms, "sent": ms, "deliver": ms, "received": ms, "props": {...}} and exits 0.
'use strict';
const path = require('path');
const modules = path.join(__dirname, 'node', 'node_modules');
const { Producer, Consumer, Message } = require(path.join(modules, 'ali-ons'));

const [nameSrv, topic, delayArg] = process.argv.slice(2);
const delay = Number(delayArg);
// httpclient is only used to look name servers up from an Aliyun onsAddr; nameSrv is given
const httpclient = { request: async () => { throw new Error('no HTTP look-up here'); } };
const common = { httpclient, nameSrv, accessKeyId: 'ak', accessKeySecret: 'sk', onsChannel: 'LOCAL' };

async function main() {
  const producer = new Producer({ ...common, producerGroup: 'GID_ONS_TIMER_P' });
  await producer.ready();
  await producer.send(new Message(topic, 'warm', 'warm')); // creates the topic
  const out = {};
  let done;
  const finished = new Promise(resolve => { done = resolve; });
  let warmSeen;
  const warmed = new Promise(resolve => { warmSeen = resolve; });
  const consumer = new Consumer({
    ...common,
    consumerGroup: 'GID_ONS_TIMER_C',
    consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET',
    rebalanceInterval: 1000,
  });
  consumer.subscribe(topic, '*', async msg => {
    const body = msg.body.toString();
    if (body === 'warm') {
      out.warm = Date.now();
      warmSeen();
    } else if (body === 'timer') {
      out.received = Date.now();
      out.props = msg.properties;
      done();
    }
  });
  consumer.on('error', err => console.error('consumer error', err.message)); // e.g. no %RETRY% route yet
  await consumer.ready();
  await warmed; // the consumer owns the queues and is pulling: arrival times are now meaningful
  const msg = new Message(topic, 'timer', 'timer');
  out.sent = Date.now();
  out.deliver = out.sent + delay;
  msg.setStartDeliverTime(out.deliver);
  await producer.send(msg);
  await finished;
  console.log(JSON.stringify(out));
  const closing = Promise.all([consumer.close(), producer.close()]).catch(() => {});
  await Promise.race([closing, new Promise(r => setTimeout(r, 2000))]);
  process.exit(0);
}

setTimeout(() => { console.error('timed out'); process.exit(3); }, 40000).unref();
main().catch(err => { console.error(err); process.exit(2); });

// ali-ons 3.12 (npm) subscribing with an SQL92 expression to tidemq. Usage:
//   node ali_ons_sql92.js <namesrv> <topic> <expression> <messages.json>
// Sends each message of messages.json ([{"body": ..., "props": {...}}, ...], the last one must match
// and is the end marker) to <topic> (one queue), then consumes with
// {expressionType: 'SQL92', subString: <expression>} until the end marker arrives (ali-ons consumes
// one message at a time, in queue order) and prints {"received": [bodies...]}.
// With a bad expression, ali-ons gets the broker's refusal on every pull: the first consumer error is
// printed as {"error": message} (exit 0). A timeout exits 3.
'use strict';
const fs = require('fs');
const path = require('path');
const modules = path.join(__dirname, 'node', 'node_modules');
const { Producer, Consumer, Message } = require(path.join(modules, 'ali-ons'));

const [nameSrv, topic, expression, messagesFile] = process.argv.slice(2);
const messages = JSON.parse(fs.readFileSync(messagesFile, 'utf8'));
// httpclient is only used to look name servers up from an Aliyun onsAddr; nameSrv is given
const httpclient = { request: async () => { throw new Error('no HTTP look-up here'); } };
const common = { httpclient, nameSrv, accessKeyId: 'ak', accessKeySecret: 'sk', onsChannel: 'LOCAL' };

async function main() {
  const producer = new Producer({ ...common, producerGroup: 'GID_ONS_SQL_P' });
  await producer.ready();
  for (const m of messages) {
    const msg = new Message(topic, m.tag || '', m.body);
    Object.assign(msg.properties, m.props);
    await producer.send(msg);
  }
  const received = [];
  const endBody = messages[messages.length - 1].body;
  let finish;
  const finished = new Promise(resolve => { finish = resolve; });
  const consumer = new Consumer({
    ...common,
    consumerGroup: 'GID_ONS_SQL_C',
    consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET',
    rebalanceInterval: 1000,
  });
  consumer.subscribe(topic, { expressionType: 'SQL92', subString: expression }, async msg => {
    const body = msg.body.toString();
    received.push(body);
    if (body === endBody) finish({ received });
  });
  consumer.on('error', err => {
    // the refusal of a bad expression (SUBSCRIPTION_PARSE_FAILED on the pull); other errors, e.g.
    // no route to %RETRY% yet, are transient
    if (/subscription|MessageSelector/i.test(err.message)) finish({ error: err.message });
    else console.error('consumer error', err.message);
  });
  await consumer.ready();
  console.log(JSON.stringify(await finished));
  const closing = Promise.all([consumer.close(), producer.close()]).catch(() => {});
  await Promise.race([closing, new Promise(r => setTimeout(r, 2000))]);
  process.exit(0);
}

setTimeout(() => { console.error('timed out'); process.exit(3); }, 40000).unref();
main().catch(err => { console.error(err); process.exit(2); });

// ali-ons 3.12 (npm) sending half messages the way its users do: a Message with TRAN_MSG=true and
// PGROUP set by hand (ali-ons has no END_TRANSACTION and ignores the broker's checks), plus plain
// messages on the same topic. One JSON argument in, one JSON line out.
'use strict';
const path = require('path');
const { Producer, Message } = require(path.join(__dirname, 'node', 'node_modules', 'ali-ons'));

async function main() {
  const spec = JSON.parse(process.argv[2]);
  const producer = new Producer({
    httpclient: {}, // only used to look up an Aliyun name server; nameSrv is given
    accessKeyId: '',
    accessKeySecret: '',
    producerGroup: spec.group,
    nameSrv: spec.namesrv,
  });
  await producer.ready();
  const out = { half: [], plain: [] };
  for (let i = 0; i < spec.half; i++) {
    const msg = new Message(spec.topic, 'TagHalf', `half-${i}`);
    msg.properties.TRAN_MSG = 'true';
    msg.properties.PGROUP = spec.group;
    const r = await producer.send(msg);
    out.half.push({ status: r.sendStatus, msgId: r.msgId });
  }
  for (let i = 0; i < spec.plain; i++) {
    const r = await producer.send(new Message(spec.topic, 'TagPlain', `plain-${i}`));
    out.plain.push({ status: r.sendStatus, msgId: r.msgId });
  }
  await producer.close();
  process.stdout.write(JSON.stringify(out) + '\n', () => process.exit(0)); // ali-ons keeps timers alive
}

main().catch((err) => {
  process.stderr.write(String(err && err.stack ? err.stack : err) + '\n');
  process.exit(1);
});

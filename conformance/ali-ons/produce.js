'use strict';
// Send N messages with ali-ons's Producer (SEND_MESSAGE_V2), one at a time, and report each.
//
//   node produce.js --namesrv 127.0.0.1:9876 --topic T --group PID --n 20 --run-id r1
//                   [--start 0] [--tag TagA] [--big-every 0] [--hold] [--deadline-ms 60000]
//
// Message i (start <= i < start+n) has key `<run-id>-<i>` and the body bodyFor(run-id, i); with
// --big-every K every K-th body is over 4 KiB, which ali-ons sends zlib-compressed (sysFlag bit 0).
// With --hold the producer stays connected after its last send (it keeps sending heartbeats, so
// the broker lists it) until SIGTERM/SIGINT, then closes.
// Events: start, ready {clientId} (the id its heartbeats carry), sent {key, body, msgId, queueId,
// queueOffset}, holding, done {sent}; fatal; timeout.

const { Producer, Message } = require('ali-ons');
const common = require('./common');

const SCRIPT = 'produce';

async function main() {
  const args = common.parse(SCRIPT, {
    start: { type: 'string' },
    tag: { type: 'string' },
    'big-every': { type: 'string' },
    hold: { type: 'boolean' },
  }, { n: '10', start: '0', tag: 'TagA', 'big-every': '0', group: 'PID_CONFORMANCE' });
  const n = Number(args.n);
  const start = Number(args.start);
  const bigEvery = Number(args['big-every']);
  let sent = 0;
  const state = { phase: 'starting the producer', summary: () => ({ sent }) };
  common.startDeadline(SCRIPT, args['deadline-ms'], state);
  common.emit('start', { script: SCRIPT, runId: args['run-id'], topic: args.topic, group: args.group, n, pid: process.pid });

  const producer = new Producer({ ...common.clientOptions(SCRIPT, args), producerGroup: args.group });
  producer.on('error', common.clientErrorReporter());
  await producer.ready();
  common.emit('ready', { script: SCRIPT, clientId: producer.clientId });

  for (let i = start; i < start + n; i++) {
    const key = `${args['run-id']}-${i}`;
    const body = common.bodyFor(args['run-id'], i, bigEvery > 0 && i % bigEvery === bigEvery - 1);
    const msg = new Message(args.topic, args.tag, body);
    msg.keys = [ key ];
    state.phase = `sending message ${i} (${sent} of ${n} sent)`;
    let result;
    try {
      result = await producer.send(msg);
    } catch (err) {
      common.emit('fatal', { script: SCRIPT, phase: state.phase, sent, ...common.errorFields(err) });
      process.exit(common.EXIT_FAILED);
    }
    sent++;
    common.emit('sent', {
      key, body, msgId: result.msgId, sendStatus: result.sendStatus,
      queueId: result.messageQueue ? Number(result.messageQueue.queueId) : null, queueOffset: result.queueOffset,
    });
  }

  if (args.hold) {
    state.phase = 'holding the connection until SIGTERM';
    const signalled = new Promise(resolve => {
      process.on('SIGTERM', resolve);
      process.on('SIGINT', resolve);
    });
    common.emit('holding', { script: SCRIPT });
    await signalled;
  }

  state.phase = 'closing the producer';
  const closed = await common.closeWithin(producer, 5000);
  common.emit('done', { script: SCRIPT, sent, close: closed });
  process.exit(common.EXIT_OK);
}

main().catch(err => {
  common.emit('fatal', { script: SCRIPT, ...common.errorFields(err) });
  process.exit(common.EXIT_FAILED);
});

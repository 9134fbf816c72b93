'use strict';
// Receive with the official 5.x Node.js client's SimpleConsumer (rocketmq-client-nodejs 1.0.8)
// over gRPC (POP underneath) and report every delivery.
//
//   node simple_consume.js --endpoints 127.0.0.1:8081 --topic T --group G --run-id r1 --expect K
//                          [--batch 16] [--invisible-ms 15000] [--await-ms 2000]
//                          [--first ack|skip|change] [--change-to-ms 2000] [--tag '*']
//                          [--linger-ms 0] [--deadline-ms 60000]
//
// Loops receive(--batch, --invisible-ms) (long polling --await-ms) until K distinct keys of this
// run were acked, goes on receiving for --linger-ms (a redelivery or a duplicate shows then; 0, the
// default: it stops at once), then
// shutdown(). On a message's first delivery (deliveryAttempt 1) it does --first:
//   ack     ack it;
//   skip    leave it: it comes back when its invisible time is over (deliveryAttempt 2);
//   change  changeInvisibleDuration(m, --change-to-ms) and leave it: it comes back after the new
//           duration, not after --invisible-ms.
// Every later delivery is acked; messages of other runs are acked and reported as `foreign`.
// receive() answering MESSAGE_NOT_FOUND is an empty list, reported as `empty`.
//
// Events: start; ready; received {key, keys, body, msgId, topic, tag, properties, messageGroup,
// deliveryAttempt, deliveryTimestamp, bornTimestamp, corrupted, offset, recvMs, action, foreign};
// acked {key, deliveryAttempt}; changed {key, toMs}; empty; receive_error; done {received, acked,
// keys}; client_error; fatal; timeout.

const { SimpleConsumer } = require('rocketmq-client-nodejs');
const {
  EXIT_OK, EXIT_FAILED, EXIT_USAGE, emit, parse, intOption, startDeadline, clientOptions, within,
  errorFields, messageFields,
} = require('./common');

const SCRIPT = 'node5-simple';
const MAX_RECEIVE_ERRORS = 20; // a front that keeps failing receives fails the scenario

async function main() {
  const args = parse(SCRIPT, {
    expect: { type: 'string' }, batch: { type: 'string' }, 'invisible-ms': { type: 'string' },
    'await-ms': { type: 'string' }, first: { type: 'string' }, 'change-to-ms': { type: 'string' },
    tag: { type: 'string' }, 'linger-ms': { type: 'string' },
  }, { batch: '16', 'invisible-ms': '15000', 'await-ms': '2000', first: 'ack', 'change-to-ms': '2000', tag: '*', 'linger-ms': '0' },
  [ 'topic', 'run-id', 'group', 'expect' ]);
  if (![ 'ack', 'skip', 'change' ].includes(args.first)) {
    emit('fatal', { script: SCRIPT, message: `usage: --first ack|skip|change, not ${args.first}` });
    return EXIT_USAGE;
  }
  const expect = intOption(SCRIPT, args, 'expect');
  const batch = intOption(SCRIPT, args, 'batch');
  const invisibleMs = intOption(SCRIPT, args, 'invisible-ms');
  const changeToMs = intOption(SCRIPT, args, 'change-to-ms');
  const lingerMs = intOption(SCRIPT, args, 'linger-ms');
  const runPrefix = `${args['run-id']}-`;
  let received = 0;
  let acked = 0;
  let errors = 0;
  const doneKeys = new Set();
  const state = { phase: 'starting', summary: () => ({ received, acked: doneKeys.size }) };
  startDeadline(SCRIPT, args['deadline-ms'], state);
  emit('start', { script: SCRIPT, runId: args['run-id'], topic: args.topic, group: args.group, expect, first: args.first, endpoints: args.endpoints });

  const consumer = new SimpleConsumer({
    ...clientOptions(SCRIPT, args),
    consumerGroup: args.group,
    subscriptions: new Map([[ args.topic, args.tag ]]),
    awaitDuration: intOption(SCRIPT, args, 'await-ms'),
  });
  state.phase = 'starting the simple consumer';
  try {
    await consumer.startup();
  } catch (err) {
    emit('fatal', { script: SCRIPT, phase: state.phase, ...errorFields(err) });
    await within(() => consumer.shutdown(), 5000);
    return EXIT_FAILED;
  }
  emit('ready', { script: SCRIPT });

  let lingerUntil = null;
  while (lingerUntil === null || Date.now() < lingerUntil) {
    state.phase = `receiving (${doneKeys.size} of ${expect} keys acked)`;
    let messages;
    try {
      messages = await consumer.receive(batch, invisibleMs);
    } catch (err) {
      errors++;
      emit('receive_error', errorFields(err));
      if (errors >= MAX_RECEIVE_ERRORS) {
        emit('fatal', { script: SCRIPT, phase: state.phase, ...errorFields(err) });
        await within(() => consumer.shutdown(), 5000);
        return EXIT_FAILED;
      }
      await new Promise(resolve => setTimeout(resolve, 200));
      continue;
    }
    if (messages.length === 0) {
      emit('empty');
    }
    for (const m of messages) {
      const fields = messageFields(m);
      const ours = typeof fields.key === 'string' && fields.key.startsWith(runPrefix);
      const attempt = fields.deliveryAttempt || 1;
      const action = ours && attempt === 1 ? args.first : 'ack';
      received++;
      emit('received', { action, foreign: !ours, ...fields });
      try {
        if (action === 'ack') {
          await consumer.ack(m);
          acked++;
          if (ours) {
            doneKeys.add(fields.key);
          }
          emit('acked', { key: fields.key, deliveryAttempt: attempt });
        } else if (action === 'change') {
          await consumer.changeInvisibleDuration(m, changeToMs);
          emit('changed', { key: fields.key, toMs: changeToMs });
        }
      } catch (err) {
        emit('fatal', { script: SCRIPT, phase: `${action} of ${fields.key}`, ...errorFields(err) });
        await within(() => consumer.shutdown(), 5000);
        return EXIT_FAILED;
      }
    }
    if (lingerUntil === null && doneKeys.size >= expect) {
      lingerUntil = Date.now() + lingerMs;
    }
  }
  state.phase = 'shutting the consumer down';
  const close = await within(() => consumer.shutdown(), 10000);
  emit('done', { script: SCRIPT, received, acked, keys: doneKeys.size, close });
  return EXIT_OK;
}

main().then(code => process.exit(code), err => {
  emit('fatal', { script: SCRIPT, ...errorFields(err) });
  process.exit(EXIT_FAILED);
});

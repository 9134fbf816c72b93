'use strict';
// Send N messages with the official 5.x Node.js client's Producer (rocketmq-client-nodejs 1.0.8)
// over gRPC and report each.
//
//   node produce.js --endpoints 127.0.0.1:8081 --topic T --group P --n 20 --run-id r1
//                   [--mode normal|fifo|delay|transaction] [--tag TagA] [--start 0] [--groups 3]
//                   [--delay-ms 3000] [--tx commit,rollback,unknown] [--checker commit|rollback]
//                   [--wait-checks K] [--deadline-ms 60000]
//
// Message i (start <= i < start+n) has keys `<run-id>-<i>` and `<run-id>-<i>#k2`, tag --tag, body
// bodyFor(run-id, i) and the user properties `run` (the run id) and `idx` (i). --group names
// nothing on the wire (5.x producers have no group). Modes (the client derives the wire
// message_type from what is set):
//   normal  NORMAL.
//   fifo    FIFO: messageGroup `<run-id>-g<i % groups>`, user properties `shard` (i % groups) and
//           `seq` (its rank within the group); sent one at a time, in order.
//   delay   DELAY: deliveryTimestamp = now + --delay-ms (millisecond precision on the wire).
//   transaction  TRANSACTION: each message in its own beginTransaction(); its fate is the --tx
//           list cycled over i: commit / rollback (from the client right after the send) or
//           unknown (left to the server's orphaned transaction check on the Telemetry stream,
//           answered by the TransactionChecker with --checker). --wait-checks K keeps the
//           producer up until K checks were answered.
//
// Events: start; sent {key, body, msgId, txId, offset, queueId, sentMs, group?, shard?, seq?,
// dueMs?, fate?}; tx_end {key, resolution}; checked {key, msgId, resolution}; done {sent,
// checks}; client_error; fatal; timeout.

const { Producer } = require('rocketmq-client-nodejs');
const { TransactionResolution } = require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb');
const {
  EXIT_OK, EXIT_FAILED, EXIT_USAGE, emit, parse, intOption, startDeadline, clientOptions, within,
  errorFields, bodyFor, keyFor,
} = require('./common');

const SCRIPT = 'node5-produce';

async function main() {
  const args = parse(SCRIPT, {
    mode: { type: 'string' }, tag: { type: 'string' }, start: { type: 'string' },
    groups: { type: 'string' }, 'delay-ms': { type: 'string' }, tx: { type: 'string' },
    checker: { type: 'string' }, 'wait-checks': { type: 'string' },
  }, { mode: 'normal', tag: 'TagA', start: '0', groups: '3', 'delay-ms': '3000', tx: 'commit', checker: 'commit', 'wait-checks': '0' });
  if (![ 'normal', 'fifo', 'delay', 'transaction' ].includes(args.mode)) {
    emit('fatal', { script: SCRIPT, message: `usage: --mode normal|fifo|delay|transaction, not ${args.mode}` });
    return EXIT_USAGE;
  }
  const fates = args.tx.split(',').map(f => f.trim()).filter(Boolean);
  if (!fates.length || fates.some(f => ![ 'commit', 'rollback', 'unknown' ].includes(f)) || ![ 'commit', 'rollback' ].includes(args.checker)) {
    emit('fatal', { script: SCRIPT, message: 'usage: --tx takes commit,rollback,unknown (comma separated), --checker commit|rollback' });
    return EXIT_USAGE;
  }
  const waitChecks = intOption(SCRIPT, args, 'wait-checks');
  const start = intOption(SCRIPT, args, 'start');
  const groups = intOption(SCRIPT, args, 'groups');
  const delayMs = intOption(SCRIPT, args, 'delay-ms');
  if (groups < 1) {
    emit('fatal', { script: SCRIPT, message: 'usage: --groups must be >= 1' });
    return EXIT_USAGE;
  }
  let sent = 0;
  const checks = [];
  let checked = () => {};
  const state = { phase: 'starting', summary: () => ({ sent, checks: checks.length }) };
  startDeadline(SCRIPT, args['deadline-ms'], state);
  emit('start', { script: SCRIPT, runId: args['run-id'], topic: args.topic, n: args.n, mode: args.mode, endpoints: args.endpoints });

  const checker = {
    async check(view) {
      const keys = [ ...(view.keys || []) ].sort();
      const key = keys.length ? keys[0] : null;
      checks.push(key);
      emit('checked', { key, msgId: view.messageId, resolution: args.checker });
      setImmediate(checked); // the client sends EndTransaction once check() returned
      return args.checker === 'commit' ? TransactionResolution.COMMIT : TransactionResolution.ROLLBACK;
    },
  };
  const producer = new Producer({ ...clientOptions(SCRIPT, args), topic: args.topic, ...(args.mode === 'transaction' ? { checker } : {}) });
  state.phase = 'starting the producer';
  try {
    await producer.startup();
  } catch (err) {
    emit('fatal', { script: SCRIPT, phase: state.phase, sent, ...errorFields(err) });
    await within(() => producer.shutdown(), 5000);
    return EXIT_FAILED;
  }
  try {
    for (let i = start; i < start + args.n; i++) {
      const key = keyFor(args['run-id'], i);
      const body = bodyFor(args['run-id'], i);
      const properties = new Map([[ 'run', args['run-id'] ], [ 'idx', String(i) ]]);
      const message = { topic: args.topic, tag: args.tag, keys: [ key, `${key}#k2` ], body: Buffer.from(body, 'utf8'), properties };
      const info = { key, body };
      if (args.mode === 'fifo') {
        const shard = i % groups;
        const seq = Math.floor((i - start) / groups);
        message.messageGroup = `${args['run-id']}-g${shard}`;
        properties.set('shard', String(shard));
        properties.set('seq', String(seq));
        Object.assign(info, { group: message.messageGroup, shard, seq });
      } else if (args.mode === 'delay') {
        message.deliveryTimestamp = new Date(Date.now() + delayMs);
        info.dueMs = message.deliveryTimestamp.getTime();
      }
      state.phase = `sending message ${i} (${sent} of ${args.n} sent)`;
      let tx;
      if (args.mode === 'transaction') {
        info.fate = fates[(i - start) % fates.length];
        tx = producer.beginTransaction();
      }
      const sentMs = Date.now();
      const r = await producer.send(message, tx);
      sent++;
      const queue = r.messageQueue;
      emit('sent', { msgId: r.messageId, txId: r.transactionId || null, offset: r.offset, queueId: queue ? queue.queueId : null, sentMs, ...info });
      if (tx && info.fate !== 'unknown') {
        state.phase = `ending the transaction of message ${i} (${info.fate})`;
        await (info.fate === 'commit' ? tx.commit() : tx.rollback());
        emit('tx_end', { key, resolution: info.fate });
      }
    }
  } catch (err) {
    emit('fatal', { script: SCRIPT, phase: state.phase, sent, ...errorFields(err) });
    await within(() => producer.shutdown(), 5000);
    return EXIT_FAILED;
  }
  if (waitChecks > 0) {
    state.phase = `waiting for ${waitChecks} transaction checks`;
    await new Promise(resolve => {
      checked = () => checks.length >= waitChecks && resolve();
      checked();
    });
    await new Promise(resolve => setTimeout(resolve, 500)); // the checker's EndTransaction
  }
  state.phase = 'shutting the producer down';
  const close = await within(() => producer.shutdown(), 10000);
  emit('done', { script: SCRIPT, sent, checks: checks.length, close });
  return EXIT_OK;
}

main().then(code => process.exit(code), err => {
  emit('fatal', { script: SCRIPT, ...errorFields(err) });
  process.exit(EXIT_FAILED);
});

'use strict';
// Consume with the official 5.x Node.js client's PushConsumer (rocketmq-client-nodejs 1.0.8) over
// gRPC (QueryAssignment, then ReceiveMessage per assigned queue, AckMessage on a success,
// ChangeInvisibleDuration on a failure; POP underneath) and report every delivery.
//
//   node push_consume.js --endpoints 127.0.0.1:8081 --topic T --group G --run-id r1 --expect K
//                        [--fail-times 0] [--tag '*'] [--linger-ms 1000] [--deadline-ms 60000]
//                        [--close-ms 30000]
//
// The listener returns ConsumeResult.FAILURE for the first --fail-times deliveries of each message
// of this run (counted here by message id; it does not throw, so the client logs no error for it)
// and ConsumeResult.SUCCESS otherwise. What the client then does is its own:
//   standard group  a success is acked; a failure changes the message's invisible time to the
//                   delay the server's backoff policy gives for its delivery attempt. 1.0.8 only
//                   reads an exponential policy; the server's customized one (the default of a
//                   group) leaves it with none, and the delay is 0: the message is visible again
//                   at once and comes back with deliveryAttempt + 1.
//   FIFO group      a failure re-runs the listener locally while the attempt is below the policy's
//                   max attempts, then forwards the message to the DLQ; with no policy (as above)
//                   max attempts is 1, so the first failure forwards it to %DLQ%<group>.
// The scenario ends --linger-ms after K distinct keys of this run succeeded (--expect 0: after
// --linger-ms), or on SIGTERM, with shutdown(), given at most --close-ms: the client waits for
// its in-flight long polls (the server's long polling timeout, 20 s) before it says goodbye.
// Messages of other runs succeed and are reported as `foreign`.
//
// Events: start; ready; received {key, keys, body, msgId, topic, tag, properties, messageGroup,
// deliveryAttempt, deliveryTimestamp, bornTimestamp, corrupted, offset, recvMs, fail, foreign,
// delivery}; done {received, succeeded, failed, close, closeMs, okQuantity, errorQuantity};
// client_error; fatal; timeout.

const { PushConsumer, ConsumeResult } = require('rocketmq-client-nodejs');
const {
  EXIT_OK, EXIT_FAILED, emit, parse, intOption, startDeadline, clientOptions, within, errorFields,
  messageFields,
} = require('./common');

const SCRIPT = 'node5-push';

async function main() {
  const args = parse(SCRIPT, {
    expect: { type: 'string' }, 'fail-times': { type: 'string' }, tag: { type: 'string' },
    'linger-ms': { type: 'string' }, 'close-ms': { type: 'string' },
  }, { 'fail-times': '0', tag: '*', 'linger-ms': '1000', 'close-ms': '30000' },
  [ 'topic', 'run-id', 'group', 'expect' ]);
  const expect = intOption(SCRIPT, args, 'expect');
  const failTimes = intOption(SCRIPT, args, 'fail-times');
  const lingerMs = intOption(SCRIPT, args, 'linger-ms');
  const closeMs = intOption(SCRIPT, args, 'close-ms');
  const runPrefix = `${args['run-id']}-`;
  const deliveries = new Map(); // message id -> deliveries seen by the listener
  const succeeded = new Set(); // keys of this run the listener returned SUCCESS for
  let received = 0;
  let failed = 0;
  let wake = null; // resolves the main wait when a key succeeds or SIGTERM comes
  let stopped = false;
  const state = { phase: 'starting', summary: () => ({ received, succeeded: succeeded.size, failed }) };
  startDeadline(SCRIPT, args['deadline-ms'], state);
  emit('start', { script: SCRIPT, runId: args['run-id'], topic: args.topic, group: args.group, expect, failTimes, endpoints: args.endpoints });

  const messageListener = {
    consume(m) {
      const fields = messageFields(m);
      const ours = typeof fields.key === 'string' && fields.key.startsWith(runPrefix);
      const delivery = (deliveries.get(fields.msgId) || 0) + 1;
      deliveries.set(fields.msgId, delivery);
      const fail = ours && delivery <= failTimes;
      received++;
      emit('received', { fail, foreign: !ours, delivery, ...fields });
      if (fail) {
        failed++;
        return ConsumeResult.FAILURE;
      }
      if (ours) {
        succeeded.add(fields.key);
        if (wake) {
          wake();
        }
      }
      return ConsumeResult.SUCCESS;
    },
  };
  const consumer = new PushConsumer({
    ...clientOptions(SCRIPT, args),
    consumerGroup: args.group,
    subscriptions: new Map([[ args.topic, args.tag ]]),
    messageListener,
  });
  state.phase = 'starting the push consumer';
  try {
    await consumer.startup();
  } catch (err) {
    emit('fatal', { script: SCRIPT, phase: state.phase, ...errorFields(err) });
    await within(() => consumer.shutdown(), 5000);
    return EXIT_FAILED;
  }
  emit('ready', { script: SCRIPT });

  process.on('SIGTERM', () => {
    stopped = true;
    if (wake) {
      wake();
    }
  });
  // (the waits are bounded by the deadline, which ends the process)
  while (succeeded.size < expect && !stopped) {
    state.phase = `consuming (${succeeded.size} of ${expect} keys succeeded)`;
    await new Promise(resolve => {
      wake = resolve;
    });
    wake = null;
  }
  if (!stopped && lingerMs > 0) {
    state.phase = `lingering ${lingerMs} ms`;
    await new Promise(resolve => {
      const timer = setTimeout(resolve, lingerMs);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    wake = null;
  }

  state.phase = 'shutting the consumer down';
  const closeStart = Date.now();
  const close = await within(() => consumer.shutdown(), closeMs);
  emit('done', {
    script: SCRIPT, received, succeeded: succeeded.size, failed, close, closeMs: Date.now() - closeStart,
  });
  return EXIT_OK;
}

main().then(code => process.exit(code), err => {
  emit('fatal', { script: SCRIPT, ...errorFields(err) });
  process.exit(EXIT_FAILED);
});

'use strict';
// Consume a topic with ali-ons's push Consumer (clustering mode) and report every message.
//
//   node consume.js --namesrv 127.0.0.1:9876 --topic T --group GID --run-id r1
//                   [--consume-from FIRST|LAST] [--expect K] [--linger-ms 1500]
//                   [--stop-after K] [--rebalance-ms 10000] [--deadline-ms 60000]
//                   [--fail-times K|always] [--max-reconsume N]
//
// It stops cleanly (Consumer.close(), which commits the offsets with UPDATE_CONSUMER_OFFSET) when
// it has seen K distinct keys and then --linger-ms more (to catch extras), or on SIGTERM/SIGINT;
// with --expect 0 only a signal stops it. The deadline ends it in any case.
// --stop-after K closes the consumer from inside the handler of the K-th distinct key, so no
// later message is consumed: that message's handler never returns, its offset is not committed,
// and a restarted consumer of the group must receive it again (at-least-once).
// --fail-times K makes the handler throw for the first K deliveries of each key (`always` or a
// negative K: every delivery); ali-ons then hands the message back with CONSUMER_SEND_MSG_BACK
// (36, delayLevel 0, its maxReconsumeTimes in the header), and the broker redelivers it through
// %RETRY%<group>, or writes it to %DLQ%<group> once it was retried --max-reconsume times
// (ali-ons's maxReconsumeTimes option, default 16). --expect then counts the keys whose handler
// succeeded. A planned failure is reported as a handler_failed event, not as a client_error.
// Events: start; ready {clientId} (the id its heartbeats carry); start_offset {queueId, offset}
// where a newly assigned queue starts; assigned {queues, offsets} whenever the rebalance changes this consumer's queues of the topic (offsets:
// where each of them started when it was assigned); received {key, body, msgId,
// topic, queueId, queueOffset, reconsumeTimes, tags, attempt, fail}; handler_failed {message};
// done {received, distinct, succeeded, close};
// client_error (ali-ons 'error' events, e.g. QUERY_CONSUMER_OFFSET answering 22 for a new group,
// which is harmless); fatal; timeout.

const { Consumer } = require('ali-ons');
const MQProducer = require('ali-ons/lib/producer/mq_producer');
const common = require('./common');

const SCRIPT = 'consume';
const PLANNED_FAILURE = 'conformance planned handler failure';
const FROM = {
  FIRST: 'CONSUME_FROM_FIRST_OFFSET',
  LAST: 'CONSUME_FROM_LAST_OFFSET',
};

async function main() {
  const args = common.parse(SCRIPT, {
    'consume-from': { type: 'string' },
    expect: { type: 'string' },
    'stop-after': { type: 'string' },
    'linger-ms': { type: 'string' },
    'rebalance-ms': { type: 'string' },
    'fail-times': { type: 'string' },
    'max-reconsume': { type: 'string' },
  }, { 'consume-from': 'FIRST', expect: '0', 'stop-after': '0', 'linger-ms': '1500', 'rebalance-ms': '10000', 'fail-times': '0', group: 'GID_CONFORMANCE' });
  const consumeFrom = FROM[String(args['consume-from']).toUpperCase()];
  if (!consumeFrom) {
    common.emit('fatal', { script: SCRIPT, message: `usage: --consume-from must be FIRST or LAST, not ${args['consume-from']}` });
    process.exit(common.EXIT_USAGE);
  }
  const expect = Number(args.expect);
  const stopAfter = Number(args['stop-after']);
  const lingerMs = Number(args['linger-ms']);
  const failTimes = String(args['fail-times']).toLowerCase() === 'always' ? -1 : Number(args['fail-times']);
  const maxReconsume = args['max-reconsume'] !== undefined ? Number(args['max-reconsume']) : undefined;
  if (!Number.isInteger(failTimes) || (maxReconsume !== undefined && !(Number.isInteger(maxReconsume) && maxReconsume >= 0))) {
    common.emit('fatal', { script: SCRIPT, message: `usage: --fail-times must be an integer or always, --max-reconsume an integer >= 0` });
    process.exit(common.EXIT_USAGE);
  }

  let received = 0;
  const keys = new Set();
  const succeeded = new Set(); // keys whose handler returned (--expect counts these)
  const attempts = new Map(); // key -> deliveries so far
  const state = { phase: 'starting the consumer', summary: () => ({ received, distinct: keys.size, succeeded: succeeded.size, expect }) };
  common.startDeadline(SCRIPT, args['deadline-ms'], state);
  common.emit('start', { script: SCRIPT, runId: args['run-id'], topic: args.topic, group: args.group, consumeFrom, expect, pid: process.pid });

  const consumer = new Consumer({
    ...common.clientOptions(SCRIPT, args),
    consumerGroup: args.group,
    consumeFromWhere: consumeFrom,
    rebalanceInterval: Number(args['rebalance-ms']),
    ...(maxReconsume !== undefined ? { maxReconsumeTimes: maxReconsume } : {}),
  });
  // ali-ons emits a handler's exception as an 'error' event (prefixed with the topic and msgId)
  // before it sends the message back: a planned failure is no complaint.
  // Once this script closes the consumer, ali-ons may report a request of its own cut short by
  // that close (a route update on the NameServer socket): closing_error, no complaint either.
  const reportClientError = common.clientErrorReporter();
  let closing = false;
  consumer.on('error', err => {
    if (String(err && err.message).includes(PLANNED_FAILURE)) {
      common.emit('handler_failed', { message: String(err.message).slice(-300) });
    } else if (closing && err && err.name === 'SocketCloseError') {
      common.emit('closing_error', { name: err.name, message: String(err.message).slice(-300) });
    } else {
      reportClientError(err);
    }
  });

  // Where each queue of the topic starts when it is assigned to this consumer: the offset
  // ali-ons's computePullFromWhere() decides (from QUERY_CONSUMER_OFFSET, then consumeFromWhere),
  // observed by wrapping that method (ali-ons is pinned to 3.12.0, where it has this name).
  const initialOffsets = new Map();
  const computePullFromWhere = consumer.computePullFromWhere.bind(consumer);
  consumer.computePullFromWhere = async messageQueue => {
    const offset = await computePullFromWhere(messageQueue);
    if (messageQueue.topic === args.topic) {
      initialOffsets.set(messageQueue.queueId, offset);
      common.emit('start_offset', { queueId: messageQueue.queueId, offset });
    }
    return offset;
  };
  let lastAssigned = '';
  const reportAssignment = () => {
    const queues = [];
    for (const { messageQueue } of consumer.processQueueTable.values()) {
      if (messageQueue.topic === args.topic) {
        queues.push(messageQueue.queueId);
      }
    }
    queues.sort((a, b) => a - b);
    const signature = queues.join(',');
    if (signature !== lastAssigned) {
      lastAssigned = signature;
      common.emit('assigned', { queues, offsets: Object.fromEntries(queues.map(q => [ q, initialOffsets.get(q) ])) });
    }
  };
  consumer.on(`topic_${args.topic}_queue_changed`, reportAssignment);

  let stopping = null;
  const stop = reason => {
    if (!stopping) {
      closing = true;
      stopping = (async () => {
        state.phase = `closing the consumer (${reason})`;
        const close = await common.closeWithin(consumer, 10000);
        // The consumer's close() commits offsets with oneway requests; closing ali-ons's inner
        // producer as well lets its MQClient close the connections, which flushes those writes.
        const defaultProducer = MQProducer.defaultProducer;
        const innerClose = defaultProducer ? await common.closeWithin(defaultProducer, 5000) : 'none';
        common.emit('done', { script: SCRIPT, reason, received, distinct: keys.size, succeeded: succeeded.size, close, innerClose });
        setTimeout(() => process.exit(common.EXIT_OK), 200);
      })();
    }
    return stopping;
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));

  let lingerTimer = null;
  consumer.subscribe(args.topic, '*', async msg => {
    received++;
    const key = msg.keys || null;
    const attempt = (attempts.get(key) || 0) + 1;
    attempts.set(key, attempt);
    const fail = failTimes < 0 || attempt <= failTimes;
    common.emit('received', {
      key,
      body: msg.body ? msg.body.toString('utf8') : null,
      msgId: msg.msgId,
      topic: msg.topic,
      tags: msg.tags || null,
      queueId: msg.queueId,
      queueOffset: msg.queueOffset,
      reconsumeTimes: msg.reconsumeTimes,
      attempt,
      fail,
    });
    if (key !== null) {
      keys.add(key);
    }
    if (fail) {
      throw new Error(`${PLANNED_FAILURE}: delivery ${attempt} of key ${key}`);
    }
    if (stopAfter > 0 && keys.size >= stopAfter) {
      await stop(`stopped in the handler of distinct key ${stopAfter}`);
      await new Promise(() => {}); // never return: this message stays unacknowledged
    }
    if (key !== null) {
      succeeded.add(key);
    }
    if (expect > 0 && succeeded.size >= expect && !lingerTimer) {
      state.phase = `lingering ${lingerMs} ms after ${expect} distinct keys`;
      lingerTimer = setTimeout(() => stop('expected keys received'), lingerMs);
    }
  });

  await consumer.ready();
  if (stopAfter > 0) {
    state.phase = `waiting for ${stopAfter} distinct keys, then stopping`;
  } else {
    state.phase = expect > 0 ? `waiting for ${expect} distinct keys` : 'consuming until SIGTERM';
  }
  common.emit('ready', { script: SCRIPT, clientId: consumer.clientId });
}

main().catch(err => {
  common.emit('fatal', { script: SCRIPT, ...common.errorFields(err) });
  process.exit(common.EXIT_FAILED);
});

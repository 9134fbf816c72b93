'use strict';
// Send numbered messages with ali-ons's Producer at a steady pace, across a broker failover, and
// report every acknowledgement and every failure: a failed send is reported and the next number
// is sent (no retry of the same number), so "every acknowledged id is received" can be checked.
//
//   node failover_produce.js --namesrv 127.0.0.1:9876 --topic T --group PID --run-id r1
//                            [--interval-ms 30] [--duration-ms 60000] [--route-poll-ms N]
//                            [--deadline-ms 90000]
//
// It sends until --duration-ms has passed or SIGTERM/SIGINT, then closes the producer.
// --route-poll-ms (common to the scripts) sets ali-ons's `pollNameServerInteval` (sic; default
// 30000): how often it asks the NameServer for the routes of its topics. A send to a dead broker is not followed by a route
// lookup in ali-ons 3.12.0: only that poll moves the producer to a new master.
// Message i has key `<run-id>-<i>` and the body bodyFor(run-id, i).
// Events: start; ready; sent {key, body, i, msgId, sendStatus, queueId, queueOffset, ms};
// send_failed {key, i, ms, name, code, message}; done {acked, failed, close}; client_error;
// fatal; timeout. `ms` is the wall clock (epoch ms) when the send returned.

const { Producer, Message } = require('ali-ons');
const common = require('./common');

const SCRIPT = 'failover_produce';

async function main() {
  const args = common.parse(SCRIPT, {
    'interval-ms': { type: 'string' },
    'duration-ms': { type: 'string' },
  }, { 'interval-ms': '30', 'duration-ms': '60000', group: 'PID_CONFORMANCE' });
  const intervalMs = Number(args['interval-ms']);
  const durationMs = Number(args['duration-ms']);
  let acked = 0;
  let failed = 0;
  const state = { phase: 'starting the producer', summary: () => ({ acked, failed }) };
  common.startDeadline(SCRIPT, args['deadline-ms'], state);
  common.emit('start', { script: SCRIPT, runId: args['run-id'], topic: args.topic, group: args.group, intervalMs, durationMs, pid: process.pid });

  let stopReason = null;
  process.on('SIGTERM', () => { stopReason = stopReason || 'SIGTERM'; });
  process.on('SIGINT', () => { stopReason = stopReason || 'SIGINT'; });

  const producer = new Producer({ ...common.clientOptions(SCRIPT, args), producerGroup: args.group });
  producer.on('error', common.clientErrorReporter());
  await producer.ready();
  common.emit('ready', { script: SCRIPT });

  const begin = Date.now();
  for (let i = 0; !stopReason && Date.now() - begin < durationMs; i++) {
    const key = `${args['run-id']}-${i}`;
    const body = common.bodyFor(args['run-id'], i, false);
    const msg = new Message(args.topic, 'TagA', body);
    msg.keys = [ key ];
    state.phase = `sending message ${i} (${acked} acked, ${failed} failed)`;
    try {
      const result = await producer.send(msg);
      acked++;
      common.emit('sent', {
        key, body, i, msgId: result.msgId, sendStatus: result.sendStatus,
        queueId: result.messageQueue ? Number(result.messageQueue.queueId) : null,
        queueOffset: result.queueOffset, ms: Date.now(),
      });
    } catch (err) {
      failed++;
      common.emit('send_failed', { key, i, ms: Date.now(), ...common.errorFields(err) });
    }
    await new Promise(resolve => setTimeout(resolve, intervalMs));
  }

  state.phase = 'closing the producer';
  const closed = await common.closeWithin(producer, 5000);
  common.emit('done', { script: SCRIPT, reason: stopReason || 'duration', acked, failed, close: closed });
  process.exit(common.EXIT_OK);
}

main().catch(err => {
  common.emit('fatal', { script: SCRIPT, ...common.errorFields(err) });
  process.exit(common.EXIT_FAILED);
});

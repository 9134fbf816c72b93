'use strict';
// Shared plumbing of the scenarios run by the official 5.x Node.js client, rocketmq-client-nodejs
// 1.0.8 (gRPC apache.rocketmq.v2.MessagingService): arguments, JSON-line events on stdout, a hard
// deadline, the client options, one event shape for a received MessageView.
//
// The client takes a `logger` option; the one given here writes warnings and errors to stderr
// and reports each error as a `client_error` event (the tests count them), so the client's
// default file logger ($HOME/logs/rocketmq/) is not used. Exit codes: 0 done, 1 the client
// failed, 2 the deadline passed, 64 usage.

const { parseArgs, format } = require('node:util');

const EXIT_OK = 0;
const EXIT_FAILED = 1;
const EXIT_TIMEOUT = 2;
const EXIT_USAGE = 64;
const MAX_CLIENT_ERRORS = 30; // a dead front makes one a second: report the first ones

function emit(event, fields = {}) {
  process.stdout.write(JSON.stringify({ event, ...fields }) + '\n');
}

// Options every script takes; each also reads CONFORMANCE_<NAME> from the environment, the
// command line winning. --endpoints is the gRPC front (host:port), not the NameServer.
const COMMON_OPTIONS = {
  endpoints: { type: 'string' },
  topic: { type: 'string' },
  group: { type: 'string' },
  n: { type: 'string' },
  'run-id': { type: 'string' },
  'deadline-ms': { type: 'string' },
  'request-timeout-ms': { type: 'string' },
};

function parse(script, extraOptions = {}, defaults = {}, required = [ 'topic', 'run-id', 'group' ]) {
  const options = { ...COMMON_OPTIONS, ...extraOptions };
  let values;
  try {
    ({ values } = parseArgs({ options, strict: true, allowPositionals: false }));
  } catch (err) {
    emit('fatal', { script, message: `usage: ${err.message}` });
    process.exit(EXIT_USAGE);
  }
  const args = {};
  for (const name of Object.keys(options)) {
    const envName = 'CONFORMANCE_' + name.toUpperCase().replace(/-/g, '_');
    const value = values[name] !== undefined ? values[name] : process.env[envName];
    args[name] = value !== undefined ? value : defaults[name];
  }
  args.endpoints = args.endpoints || '127.0.0.1:8081';
  args['deadline-ms'] = Number(args['deadline-ms'] || 60000);
  args['request-timeout-ms'] = Number(args['request-timeout-ms'] || 5000);
  args.n = Number(args.n || 10);
  for (const name of required) {
    if (!args[name]) {
      emit('fatal', { script, message: `usage: --${name} (or CONFORMANCE_${name.toUpperCase().replace(/-/g, '_')}) is required` });
      process.exit(EXIT_USAGE);
    }
  }
  for (const name of [ 'n', 'deadline-ms', 'request-timeout-ms' ]) {
    if (!Number.isInteger(args[name]) || args[name] < 0) {
      emit('fatal', { script, message: `usage: --${name} must be a whole number >= 0, not ${args[name]}` });
      process.exit(EXIT_USAGE);
    }
  }
  return args;
}

// A whole number option, or exit 64 saying which.
function intOption(script, args, name) {
  const value = Number(args[name]);
  if (!Number.isInteger(value) || value < 0) {
    emit('fatal', { script, message: `usage: --${name} must be a whole number >= 0, not ${args[name]}` });
    process.exit(EXIT_USAGE);
  }
  return value;
}

// The deadline is hard: when it passes the process prints why and exits, whatever the client is
// doing (a hung stream, a retry loop). `state.phase` names what the script was waiting for.
function startDeadline(script, ms, state) {
  // The client throws from inside its stream handlers on answers it cannot use (e.g. Settings
  // without an exponential backoff for a producer): report that as this scenario's failure.
  process.on('uncaughtException', err => {
    emit('fatal', { script, phase: state.phase, uncaught: true, ...errorFields(err), stack: String(err && err.stack).slice(0, 600) });
    process.exit(EXIT_FAILED);
  });
  const timer = setTimeout(() => {
    emit('timeout', { script, deadlineMs: ms, phase: state.phase, message: `${script}: no result within ${ms} ms while ${state.phase}`, ...(state.summary ? state.summary() : {}) });
    process.exit(EXIT_TIMEOUT);
  }, ms);
  timer.unref();
  return timer;
}

function makeLogger(script) {
  const verbose = process.env.CONFORMANCE_VERBOSE === '1';
  const out = level => (...args) => console.error(`[${script}] ${level} ${format(...args)}`);
  let errors = 0;
  return {
    info: verbose ? out('info') : () => {},
    debug: verbose ? out('debug') : () => {},
    warn: out('warn'),
    error: (...args) => {
      out('error')(...args);
      errors++;
      if (errors <= MAX_CLIENT_ERRORS) {
        emit('client_error', { message: format(...args).slice(0, 400) });
      }
    },
    close: () => {},
  };
}

function clientOptions(script, args) {
  return {
    endpoints: args.endpoints,
    namespace: '',
    requestTimeout: args['request-timeout-ms'],
    logger: makeLogger(script),
  };
}

// Run `fn` (a shutdown, say), but never wait more than `ms` for it.
async function within(fn, ms) {
  let timer;
  const timeout = new Promise(resolve => {
    timer = setTimeout(() => resolve('timeout'), ms);
  });
  try {
    return await Promise.race([ Promise.resolve().then(fn).then(() => 'closed', err => `error: ${err && err.message}`), timeout ]);
  } finally {
    clearTimeout(timer);
  }
}

function errorFields(err) {
  let message = String(err && err.message || err);
  if (message.length > 400) {
    message = '…' + message.slice(-400);
  }
  return { name: err && err.name, code: err && err.code, message };
}

// The body of message `i` of a run: text with a non-ASCII part, so bytes must survive the trip.
function bodyFor(runId, i) {
  return `rocketlite grpc conformance ${runId} #${i} — 消息`;
}

function keyFor(runId, i) {
  return `${runId}-${i}`;
}

// A received MessageView as event fields; `key` is the smallest of its keys (ours: `<run>-<i>`).
function messageFields(m) {
  const keys = [ ...(m.keys || []) ].sort();
  return {
    key: keys.length ? keys[0] : null,
    keys,
    body: m.body ? m.body.toString('utf8') : null,
    msgId: m.messageId,
    topic: m.topic,
    tag: m.tag || null,
    properties: Object.fromEntries(m.properties || []),
    messageGroup: m.messageGroup || null,
    deliveryAttempt: m.deliveryAttempt,
    deliveryTimestamp: m.deliveryTimestamp ? m.deliveryTimestamp.getTime() : null,
    bornTimestamp: m.bornTimestamp ? m.bornTimestamp.getTime() : null,
    corrupted: Boolean(m.corrupted),
    offset: m.offset === undefined ? null : m.offset,
    recvMs: Date.now(),
  };
}

module.exports = {
  EXIT_OK, EXIT_FAILED, EXIT_TIMEOUT, EXIT_USAGE,
  emit, parse, intOption, startDeadline, clientOptions, within, errorFields, bodyFor, keyFor,
  messageFields,
};

'use strict';
// Shared plumbing of the ali-ons scenario scripts: arguments, JSON-line events on stdout, a hard
// deadline, and the client options that point ali-ons at a local NameServer.
//
// Every event is one JSON object on one stdout line with an "event" field; ali-ons itself logs
// warnings and errors to stderr (its default logger uses console.warn/console.error), so stdout
// carries nothing else. Exit codes: 0 done, 1 the client failed, 2 the deadline passed, 64 usage.

const { parseArgs, format } = require('node:util');

const EXIT_OK = 0;
const EXIT_FAILED = 1;
const EXIT_TIMEOUT = 2;
const EXIT_USAGE = 64;

function emit(event, fields = {}) {
  process.stdout.write(JSON.stringify({ event, ...fields }) + '\n');
}

// Options every script takes; each also reads CONFORMANCE_<NAME> from the environment
// (e.g. CONFORMANCE_NAMESRV), the command line winning.
const COMMON_OPTIONS = {
  namesrv: { type: 'string' },
  topic: { type: 'string' },
  group: { type: 'string' },
  n: { type: 'string' },
  'run-id': { type: 'string' },
  'deadline-ms': { type: 'string' },
  // ali-ons's pollNameServerInteval (sic): how often it re-reads its topics' routes (default
  // 30000 ms); unset, ali-ons's default applies.
  'route-poll-ms': { type: 'string' },
  // ali-ons's heartbeatBrokerInterval: how often it sends HEART_BEAT to its brokers (default
  // 30000 ms; a producer's first one goes out only then); unset, ali-ons's default applies.
  'heartbeat-ms': { type: 'string' },
};

function parse(script, extraOptions = {}, defaults = {}) {
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
  args.namesrv = args.namesrv || '127.0.0.1:9876';
  args['deadline-ms'] = Number(args['deadline-ms'] || 60000);
  for (const required of [ 'topic', 'run-id' ]) {
    if (!args[required]) {
      emit('fatal', { script, message: `usage: --${required} (or CONFORMANCE_${required.toUpperCase().replace(/-/g, '_')}) is required` });
      process.exit(EXIT_USAGE);
    }
  }
  return args;
}

// The deadline is hard: when it passes the process prints why and exits, whatever the client is
// doing (a hung connection, a retry loop). `phase` names what the script was waiting for.
function startDeadline(script, ms, state) {
  const timer = setTimeout(() => {
    emit('timeout', { script, deadlineMs: ms, phase: state.phase, message: `${script}: no result within ${ms} ms while ${state.phase}`, ...(state.summary ? state.summary() : {}) });
    process.exit(EXIT_TIMEOUT);
  }, ms);
  timer.unref();
  return timer;
}

// ali-ons asserts that an httpclient is given, but only uses it to look up the NameServer address
// from Aliyun's ONS address service, which it never does once `nameSrv` is set.
const stubHttpclient = {
  async request() {
    throw new Error('no ons: this client is configured with nameSrv and must not call the ONS address service');
  },
};

// ali-ons's logger interface; warnings and errors go to stderr, info and debug only if asked.
function makeLogger(script) {
  const verbose = process.env.CONFORMANCE_VERBOSE === '1';
  const out = level => (...args) => console.error(`[${script}] ${level} ${format(...args)}`);
  return {
    info: verbose ? out('info') : () => {},
    debug: () => {},
    warn: out('warn'),
    error: out('error'),
  };
}

function clientOptions(script, args) {
  return {
    httpclient: stubHttpclient,
    nameSrv: args.namesrv,
    logger: makeLogger(script),
    ...(args['route-poll-ms'] ? { pollNameServerInteval: Number(args['route-poll-ms']) } : {}),
    ...(args['heartbeat-ms'] ? { heartbeatBrokerInterval: Number(args['heartbeat-ms']) } : {}),
    // ACL: with CONFORMANCE_ACCESS_KEY and CONFORMANCE_SECRET_KEY set, ali-ons signs every
    // request (its accessKeyId/accessKeySecret options; docs/security.md).
    ...(process.env.CONFORMANCE_ACCESS_KEY ? {
      accessKeyId: process.env.CONFORMANCE_ACCESS_KEY,
      accessKeySecret: process.env.CONFORMANCE_SECRET_KEY,
    } : {}),
  };
}

// Close a client, but never wait more than `ms` for it.
async function closeWithin(client, ms) {
  let timer;
  const timeout = new Promise(resolve => {
    timer = setTimeout(() => resolve('timeout'), ms);
  });
  try {
    return await Promise.race([ client.close().then(() => 'closed'), timeout ]);
  } finally {
    clearTimeout(timer);
  }
}

// ali-ons re-emits one error object through several layers, each prefixing its message: keep the
// tail, which names the cause.
function errorFields(err) {
  let message = String(err && err.message || err);
  if (message.length > 400) {
    message = '…' + message.slice(-400);
  }
  return { name: err && err.name, code: err && err.code, message };
}

// Report ali-ons's 'error' events, at most `limit` of them (a dead NameServer makes one a second).
function clientErrorReporter(limit = 30) {
  let count = 0;
  return err => {
    count++;
    if (count <= limit) {
      emit('client_error', errorFields(err));
    } else if (count === limit + 1) {
      emit('client_error', { message: `more than ${limit} client errors; no more are reported` });
    }
  };
}

// The body of message `i` of a run: text with a non-ASCII part, so that bytes (not just ASCII
// characters) must survive the round trip; `big` bodies pass ali-ons's 4 KiB compression threshold.
function bodyFor(runId, i, big) {
  const head = `rocketlite conformance ${runId} #${i} — 消息`;
  if (!big) {
    return head;
  }
  let body = head;
  for (let j = 0; body.length < 5000; j++) {
    body += ` ${runId}:${i}:${j}`;
  }
  return body;
}

module.exports = {
  EXIT_OK, EXIT_FAILED, EXIT_TIMEOUT, EXIT_USAGE,
  emit, parse, startDeadline, clientOptions, closeWithin, errorFields, clientErrorReporter, bodyFor,
};

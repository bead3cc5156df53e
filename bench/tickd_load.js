#!/usr/bin/env node
// tickd side of the benchmark loads (the wrk scripts post.lua and batch.lua
// do the ingest runs). Each mode prints one JSON line on stdout.
//
//   node tickd_load.js insert --url http://H:P --cb URL --n N [--batch 1000] [--conc 4]
//                             (--at MS | --delay MS | --spread-min M) [--req-bytes B] [--timeout-ms MS]
//                             [--shape callback]
//                             [--spread-from-min F] [--window-ms W]
//                             (--spread-min M: each batch due in one minute picked at random
//                             among M from the F-th (1) on, at random milliseconds of it; --window-ms W
//                             with --at: due at random over [at, at + W))
//   node tickd_load.js ids --url http://H:P --cb URL --n N --out FILE [--conc 4] [--req-bytes B]
//                             (N tasks due within the next day from 30 min on, their ids
//                             written to FILE, one a line, in random order: for bench/ids.lua)
//   node tickd_load.js steady --url http://H:P --cb URL --secs 15 --batch 100 --every 50 --ahead 2000
//                             [--shape callback]
//   node tickd_load.js schedules --url http://H:P --cb URL --n N [--conc 64] [--cron EXPR] [--req-bytes B]
//                             [--spread seconds|ms]
//                             (POST /v1/schedules, one each, keys sb0..sbN-1. --spread seconds:
//                             schedule i runs every minute at second i % 60, "S * * * * *";
//                             --spread ms: every_ms 60000, the N first runs evenly over the
//                             minute that starts at --start MS)
//
// Every task goes through POST /v1/tasks/batch; a result that is not a
// stored task counts as an error (and insert exits 1).
'use strict';
const http = require('http');

const args = { _: [] };
for (let i = 2; i < process.argv.length; i++) {
  const a = process.argv[i];
  if (a.startsWith('--')) args[a.slice(2)] = process.argv[++i];
  else args._.push(a);
}
const mode = args._[0];
const num = (k, d) => (args[k] === undefined ? d : Number(args[k]));
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const die = (msg) => { process.stderr.write(`tickd_load.js ${mode}: ${msg}\n`); process.exit(1); };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
if (!args.url || !args.cb) die('--url and --cb are required');
const base = new URL(args.url);
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

function post(path, obj) {
  const body = JSON.stringify(obj);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: base.hostname, port: base.port, path, method: 'POST', agent,
      headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) } }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ code: res.statusCode, text: Buffer.concat(chunks).toString() }));
      res.on('error', reject);
    });
    req.setTimeout(60000, () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end(body);
  });
}

function postBatch(tasks) {
  const body = JSON.stringify({ tasks });
  return new Promise((resolve, reject) => {
    const req = http.request({ host: base.hostname, port: base.port, path: '/v1/tasks/batch', method: 'POST', agent,
      headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) } }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        if (res.statusCode !== 200) return reject(new Error(`HTTP ${res.statusCode}: ${Buffer.concat(chunks).toString().slice(0, 300)}`));
        let bad = 0, first = null;
        try {
          for (const r of JSON.parse(Buffer.concat(chunks).toString()).results) {
            if (!r.id) { bad++; if (!first) first = JSON.stringify(r).slice(0, 300); }
          }
        } catch (e) { return reject(e); }
        resolve({ bad, first });
      });
      res.on('error', reject);
    });
    req.setTimeout(60000, () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end(body);
  });
}

// --shape callback: each callback the request bench/README.md calls
// callback-shaped, which wrk (bench/cb.lua) and volley.c send too: a
// 102-byte JSON body (given as JSON, so tickd sends it with Content-Type:
// application/json) and the producer's traceparent (tickd sends a span of
// the attempt's own in it)
const CB_SHAPE = args.shape === 'callback';
if (args.shape && !CB_SHAPE) die('--shape: only "callback" is known');
const CB_BODY = { order: 'A-1042', action: 'remind', note: 'x'.repeat(56) };
const CB_TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

function task(at, reqBytes, timeoutMs) {
  const t = { callback_url: args.cb, method: 'POST', execute_at: at };
  if (reqBytes) t.req = 'x'.repeat(reqBytes);
  else if (CB_SHAPE) { t.req = CB_BODY; t.traceparent = CB_TRACEPARENT; }
  if (timeoutMs) t.timeout_ms = timeoutMs;
  return t;
}

async function modeInsert() {
  const n = num('n', 0), batch = num('batch', 1000), conc = num('conc', 4);
  const reqBytes = num('req-bytes', 0), timeoutMs = num('timeout-ms', 0);
  if (!n) die('--n is required');
  const spread = num('spread-min', 0), from = num('spread-from-min', 1), win = num('window-ms', 0);
  const atOf = () => (args.at ? Number(args.at) + Math.floor(Math.random() * win)
                              : Date.now() + num('delay', 0));
  const t0 = Date.now();
  let next = 0, bad = 0, first = null;
  const loop = async () => {
    while (next < n) {
      const k = Math.min(batch, n - next);
      next += k;
      const tasks = [];
      const minute = spread ? (Math.floor(Date.now() / 60000) + from + Math.floor(Math.random() * spread)) * 60000 : 0;
      for (let i = 0; i < k; i++) {
        tasks.push(task(spread ? minute + Math.floor(Math.random() * 60000) : atOf(), reqBytes, timeoutMs));
      }
      const r = await postBatch(tasks);
      bad += r.bad;
      if (r.first && !first) first = r.first;
    }
  };
  await Promise.all(Array.from({ length: conc }, loop));
  out({ mode: 'insert', tasks: n, errors: bad, first_error: first, ms: Date.now() - t0, end: Date.now() });
  if (bad) process.exit(1);
}

async function modeIds() {
  const n = num('n', 0), conc = num('conc', 4), reqBytes = num('req-bytes', 0);
  if (!n || !args.out) die('--n and --out are required');
  const ids = [];
  let next = 0;
  const loop = async () => {
    while (next < n) {
      const k = Math.min(1000, n - next);
      next += k;
      const tasks = [];
      for (let i = 0; i < k; i++) {
        tasks.push(task(Date.now() + 1800000 + Math.floor(Math.random() * 84600000), reqBytes, 0));
      }
      const r = await post('/v1/tasks/batch', { tasks });
      if (r.code !== 200) die(`batch: HTTP ${r.code}`);
      for (const x of JSON.parse(r.text).results) {
        if (!x.id) die(`batch: ${JSON.stringify(x).slice(0, 300)}`);
        ids.push(x.id);
      }
    }
  };
  await Promise.all(Array.from({ length: conc }, loop));
  for (let i = ids.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [ids[i], ids[j]] = [ids[j], ids[i]];
  }
  require('fs').writeFileSync(args.out, ids.join('\n') + '\n');
  out({ mode: 'ids', n: ids.length });
}

async function modeSteady() {
  const secs = num('secs', 15), batch = num('batch', 100), every = num('every', 50), ahead = num('ahead', 2000);
  let sent = 0, errors = 0, lag = 0, inflight = 0, maxInflight = 0, first = null;
  const t0 = Date.now(), ticks = Math.round((secs * 1000) / every);
  const pending = [];
  for (let i = 0; i < ticks; i++) {
    const at = t0 + i * every;
    const wait = at - Date.now();
    if (wait > 0) await sleep(wait);
    else lag = Math.max(lag, -wait);
    const tasks = [];
    for (let k = 0; k < batch; k++) tasks.push(task(Date.now() + ahead));
    inflight++; maxInflight = Math.max(maxInflight, inflight);
    pending.push(postBatch(tasks).then((r) => { sent += batch - r.bad; errors += r.bad; if (r.first && !first) first = r.first; },
      (e) => { errors += batch; if (!first) first = e.message; }).finally(() => { inflight--; }));
  }
  await Promise.all(pending);
  out({ mode: 'steady', sent, errors, first_error: first, secs: (Date.now() - t0) / 1000, max_send_lag_ms: lag, max_inflight: maxInflight });
}

async function modeSchedules() {
  const n = num('n', 0), conc = num('conc', 64), reqBytes = num('req-bytes', 0);
  const cron = args.cron || '* * * * *';
  if (!n) die('--n is required');
  const t0 = Date.now();
  let next = 0, bad = 0, first = null;
  const loop = async () => {
    while (next < n) {
      const i = next++;
      const t = { callback_url: args.cb, method: 'POST' };
      if (reqBytes) t.req = 'x'.repeat(reqBytes);
      const def = { key: `sb${i}`, task: t };
      if (args.spread === 'ms') {
        def.every_ms = 60000;
        def.start_at = Number(args.start) + Math.floor((i * 60000) / n);
      } else {
        def.cron = args.spread === 'seconds' ? `${i % 60} * * * * *` : cron;
      }
      const r = await post('/v1/schedules', def);
      if (r.code !== 201 && r.code !== 200) { bad++; if (!first) first = `${r.code} ${r.text.slice(0, 300)}`; }
    }
  };
  await Promise.all(Array.from({ length: conc }, loop));
  out({ mode: 'schedules', schedules: n, errors: bad, first_error: first, ms: Date.now() - t0, end: Date.now() });
  if (bad) process.exit(1);
}

const modes = { insert: modeInsert, steady: modeSteady, schedules: modeSchedules, ids: modeIds };
if (!modes[mode]) die(`unknown mode; one of ${Object.keys(modes).join(', ')}`);
modes[mode]().catch((e) => die(e.stack || e.message));

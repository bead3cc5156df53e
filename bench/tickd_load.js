#!/usr/bin/env node
// tickd side of the benchmark loads (the wrk scripts post.lua and batch.lua
// do the ingest runs). Each mode prints one JSON line on stdout.
//
//   node tickd_load.js insert --url http://H:P --cb URL --n N [--batch 1000] [--conc 4]
//                             (--at MS | --delay MS) [--req-bytes B] [--timeout-ms MS]
//   node tickd_load.js steady --url http://H:P --cb URL --secs 15 --batch 100 --every 50 --ahead 2000
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

function task(at, reqBytes, timeoutMs) {
  const t = { callback_url: args.cb, method: 'POST', execute_at: at };
  if (reqBytes) t.req = 'x'.repeat(reqBytes);
  if (timeoutMs) t.timeout_ms = timeoutMs;
  return t;
}

async function modeInsert() {
  const n = num('n', 0), batch = num('batch', 1000), conc = num('conc', 4);
  const reqBytes = num('req-bytes', 0), timeoutMs = num('timeout-ms', 0);
  if (!n) die('--n is required');
  const atOf = () => (args.at ? Number(args.at) : Date.now() + num('delay', 0));
  const t0 = Date.now();
  let next = 0, bad = 0, first = null;
  const loop = async () => {
    while (next < n) {
      const k = Math.min(batch, n - next);
      next += k;
      const tasks = [];
      for (let i = 0; i < k; i++) tasks.push(task(atOf(), reqBytes, timeoutMs));
      const r = await postBatch(tasks);
      bad += r.bad;
      if (r.first && !first) first = r.first;
    }
  };
  await Promise.all(Array.from({ length: conc }, loop));
  out({ mode: 'insert', tasks: n, errors: bad, first_error: first, ms: Date.now() - t0, end: Date.now() });
  if (bad) process.exit(1);
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

const modes = { insert: modeInsert, steady: modeSteady };
if (!modes[mode]) die(`unknown mode; one of ${Object.keys(modes).join(', ')}`);
modes[mode]().catch((e) => die(e.stack || e.message));

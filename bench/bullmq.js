#!/usr/bin/env node
// BullMQ side of the benchmarks (the peer tickd is compared with). Each mode
// prints one JSON line on stdout. Jobs carry what a tickd task carries (the
// callback URL, method, body, due time; 5 attempts with exponential backoff
// from 1 s like tickd's default retry) and are delayed jobs, BullMQ's
// equivalent of "call this URL at time T".
//
//   node bullmq.js add      --redis H:P --secs 10 --conc 64           Queue.add, conc in flight
//   node bullmq.js addbulk  --redis H:P --secs 10 --conc 4 --batch 1000   Queue.addBulk
//   node bullmq.js insert   --redis H:P --n N [--batch 1000] [--conc 4]
//                           (--at MS | --delay MS) --cb URL [--req-bytes B] [--shape callback]
//   node bullmq.js worker   --redis H:P --conc 200                   run until SIGTERM
//   node bullmq.js steady   --redis H:P --cb URL --secs 15 --batch 100 --every 50 --ahead 2000
//                           [--shape callback]
//   node bullmq.js schedulers --redis H:P --cb URL --n N [--conc 64] [--req-bytes B]
//                           upsertJobScheduler sb0..sbN-1, every 60000 ms (BullMQ's
//                           recurring jobs; each also makes its next job at once)
//
// The worker POSTs job.data.req (or job.data.json, JSON-encoded) to
// job.data.url through a keep-alive agent, with headers x-due (the job's due
// time, ms) and x-job-id.
'use strict';
const http = require('http');
const { Queue, Worker } = require('bullmq');

const args = { _: [] };
for (let i = 2; i < process.argv.length; i++) {
  const a = process.argv[i];
  if (a.startsWith('--')) args[a.slice(2)] = process.argv[++i];
  else args._.push(a);
}
const mode = args._[0];
const [rhost, rport] = (args.redis || '127.0.0.1:6379').split(':');
const connection = { host: rhost, port: Number(rport), maxRetriesPerRequest: null };
const QNAME = args.queue || 'bench';
const num = (k, d) => (args[k] === undefined ? d : Number(args[k]));
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const die = (msg) => { process.stderr.write(`bullmq.js ${mode}: ${msg}\n`); process.exit(1); };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// what tickd's retry default is: 5 attempts, backoff from 1 s, doubling
const JOB_OPTS = { attempts: 5, backoff: { type: 'exponential', delay: 1000 },
                   removeOnComplete: true, removeOnFail: true };

// --shape callback (insert, steady): each job's callback is what
// tickd_load.js's --shape callback makes tickd send: the same 102-byte JSON
// body, sent JSON-encoded with Content-Type: application/json, and the
// producer's traceparent
const CB_SHAPE = args.shape === 'callback';
if (args.shape && !CB_SHAPE) die('--shape: only "callback" is known');
const CB_BODY = { order: 'A-1042', action: 'remind', note: 'x'.repeat(56) };
const CB_TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

function jobData(cb, due, reqBytes) {
  const d = { url: cb, method: 'POST', due, timeout_ms: 10000 };
  if (reqBytes) d.req = 'x'.repeat(reqBytes);
  else if (CB_SHAPE) { d.json = CB_BODY; d.traceparent = CB_TRACEPARENT; }
  return d;
}

// a job due at `due` (ms): its creation time and delay are given, so
// timestamp + delay = due exactly
function jobOpts(due) {
  const now = Date.now();
  return { ...JOB_OPTS, timestamp: now, delay: Math.max(0, due - now) };
}

async function withQueue(fn) {
  const q = new Queue(QNAME, { connection });
  q.on('error', (e) => die(`queue: ${e.message}`));
  await q.waitUntilReady();
  try { return await fn(q); } finally { await q.close(); }
}

async function modeAdd() {
  const secs = num('secs', 10), conc = num('conc', 64), cb = args.cb || 'http://127.0.0.1:9/cb';
  return withQueue(async (q) => {
    let n = 0, errors = 0;
    const t0 = Date.now(), end = t0 + secs * 1000;
    const loop = async () => {
      while (Date.now() < end) {
        try { await q.add('cb', jobData(cb, Date.now() + 3600000), jobOpts(Date.now() + 3600000)); n++; }
        catch (e) { errors++; if (errors > 100) throw e; }
      }
    };
    await Promise.all(Array.from({ length: conc }, loop));
    const el = (Date.now() - t0) / 1000;
    out({ mode: 'add', jobs: n, errors, secs: el, rate: n / el, conc });
  });
}

async function modeAddBulk() {
  const secs = num('secs', 10), conc = num('conc', 4), batch = num('batch', 1000);
  const cb = args.cb || 'http://127.0.0.1:9/cb';
  return withQueue(async (q) => {
    let n = 0, calls = 0;
    const t0 = Date.now(), end = t0 + secs * 1000;
    const loop = async () => {
      while (Date.now() < end) {
        const due = Date.now() + 3600000;
        const jobs = [];
        for (let i = 0; i < batch; i++) jobs.push({ name: 'cb', data: jobData(cb, due), opts: jobOpts(due) });
        await q.addBulk(jobs);
        n += batch; calls++;
      }
    };
    await Promise.all(Array.from({ length: conc }, loop));
    const el = (Date.now() - t0) / 1000;
    out({ mode: 'addbulk', jobs: n, calls, secs: el, rate: n / el, conc, batch });
  });
}

async function modeInsert() {
  const n = num('n', 0), batch = num('batch', 1000), conc = num('conc', 4);
  const reqBytes = num('req-bytes', 0), cb = args.cb;
  if (!n || !cb) die('--n and --cb are required');
  const dueOf = () => (args.at ? Number(args.at) : Date.now() + num('delay', 0));
  return withQueue(async (q) => {
    const t0 = Date.now();
    let next = 0;
    const loop = async () => {
      while (next < n) {
        const k = Math.min(batch, n - next);
        next += k;
        const jobs = [];
        for (let i = 0; i < k; i++) {
          const due = dueOf();
          jobs.push({ name: 'cb', data: jobData(cb, due, reqBytes), opts: jobOpts(due) });
        }
        await q.addBulk(jobs);
      }
    };
    await Promise.all(Array.from({ length: conc }, loop));
    out({ mode: 'insert', jobs: n, ms: Date.now() - t0, end: Date.now() });
  });
}

function poster(conc) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: conc, maxFreeSockets: conc });
  return (url, body, headers) => new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', agent, headers: {
      'Content-Type': 'application/octet-stream', 'Content-Length': Buffer.byteLength(body), ...headers } },
    (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`HTTP ${res.statusCode}`))));
      res.on('error', reject);
    });
    req.setTimeout(10000, () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end(body);
  });
}

async function modeWorker() {
  const conc = num('conc', 200);
  const post = poster(conc);
  let done = 0, failed = 0;
  const w = new Worker(QNAME, async (job) => {
    const d = job.data, h = { 'x-due': String(d.due), 'x-job-id': String(job.id) };
    if (d.json) h['Content-Type'] = 'application/json';
    if (d.traceparent) h.traceparent = d.traceparent;
    await post(d.url, d.json ? JSON.stringify(d.json) : d.req || '', h);
  }, { connection, concurrency: conc });
  w.on('completed', () => done++);
  w.on('failed', () => failed++);
  w.on('error', (e) => process.stderr.write(`bullmq.js worker: ${e.message}\n`));
  await w.waitUntilReady();
  process.stderr.write('bullmq worker ready\n');
  const stop = async () => {
    const t = setTimeout(() => { out({ mode: 'worker', completed: done, failed, closed: false }); process.exit(0); }, 5000);
    try { await w.close(true); } catch (e) { /* exiting anyway */ }
    clearTimeout(t);
    out({ mode: 'worker', completed: done, failed, closed: true });
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

// the steady load: `batch` jobs every `every` ms, each due `ahead` ms after
// it is made, for `secs` seconds (100 per 50 ms = 2,000 jobs/s)
async function modeSteady() {
  const secs = num('secs', 15), batch = num('batch', 100), every = num('every', 50);
  const ahead = num('ahead', 2000), cb = args.cb;
  if (!cb) die('--cb is required');
  return withQueue(async (q) => {
    let sent = 0, errors = 0, lag = 0, inflight = 0, maxInflight = 0;
    const t0 = Date.now(), ticks = Math.round((secs * 1000) / every);
    const pending = [];
    for (let i = 0; i < ticks; i++) {
      const at = t0 + i * every;
      const wait = at - Date.now();
      if (wait > 0) await sleep(wait);
      else lag = Math.max(lag, -wait);
      const jobs = [];
      for (let k = 0; k < batch; k++) {
        const due = Date.now() + ahead;
        jobs.push({ name: 'cb', data: jobData(cb, due), opts: jobOpts(due) });
      }
      inflight++; maxInflight = Math.max(maxInflight, inflight);
      pending.push(q.addBulk(jobs).then(() => { sent += batch; }, () => { errors += batch; })
        .finally(() => { inflight--; }));
    }
    await Promise.all(pending);
    out({ mode: 'steady', sent, errors, secs: (Date.now() - t0) / 1000, max_send_lag_ms: lag, max_inflight: maxInflight });
  });
}

async function modeSchedulers() {
  const n = num('n', 0), conc = num('conc', 64), reqBytes = num('req-bytes', 0);
  const cb = args.cb || 'http://127.0.0.1:9/cb';
  if (!n) die('--n is required');
  return withQueue(async (q) => {
    const t0 = Date.now();
    let next = 0;
    const loop = async () => {
      while (next < n) {
        const i = next++;
        await q.upsertJobScheduler(`sb${i}`, { every: 60000 },
          { name: 'cb', data: jobData(cb, 0, reqBytes), opts: JOB_OPTS });
      }
    };
    await Promise.all(Array.from({ length: conc }, loop));
    out({ mode: 'schedulers', schedulers: n, ms: Date.now() - t0 });
  });
}

const modes = { schedulers: modeSchedulers, add: modeAdd, addbulk: modeAddBulk, insert: modeInsert, worker: modeWorker, steady: modeSteady };
if (!modes[mode]) die(`unknown mode; one of ${Object.keys(modes).join(', ')}`);
modes[mode]().catch((e) => die(e.stack || e.message));

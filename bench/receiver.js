#!/usr/bin/env node
// Callback receiver of the benchmarks: one node HTTP/1.1 server, keep-alive,
// answering 200 at once. It records for each callback its arrival time and
// its due time (tickd: the tickd-scheduled-at header; the BullMQ worker of
// bullmq.js: x-due), so lateness = arrival - due is measured where a user
// would see it.
//
//   node receiver.js PORT            (PORT 0 = any; the port is printed)
//   GET  /reset                      forget every recorded callback
//   GET  /count                      {count}: cheap, for polling (/stats sorts)
//   GET  /wait?n=N[&ms=T]            {count}, once N callbacks are recorded or
//                                     after T ms (default 10000): one request
//                                     for a whole wait, so that the waiting
//                                     takes no CPU from what is measured
//   GET  /stats[?since=MS][&order=1] {count, unique, dups, first, last,
//                                     p50, p99, max, mean, slow_open, conns, ...;
//                                     order=1: order_rho, the rank correlation
//                                     of arrival and due (1: oldest first)}
//   ANY  /slow[?ms=N]                answer after N ms (default 20000); not
//                                     recorded, counted in slow_open/slow_total
//   ANY  other path                  200 "ok", recorded
'use strict';
const http = require('http');
const { performance } = require('perf_hooks');

const port = Number(process.argv[2] || 0);
const nowMs = () => performance.timeOrigin + performance.now();

// Per callback: arrival, due and a 52-bit hash of its task id, in typed
// arrays (a million callbacks cost 24 MB and no garbage collection work);
// duplicates are equal hashes, counted when asked (that two of a million
// ids share one by chance has odds of about 1 in 10,000).
let n = 0;
let arrivals = new Float64Array(1 << 16), dues = new Float64Array(1 << 16), hashes = new Float64Array(1 << 16);
let nodue = 0;
let slowOpen = 0, slowTotal = 0;
let conns = 0, epoch = 0; // conns: TCP connections that carried recorded callbacks since /reset

function reset() {
  n = 0; nodue = 0; conns = 0; epoch++;
}

function grow(a) {
  const b = new Float64Array(a.length * 2);
  b.set(a);
  return b;
}

// a 52-bit hash of the id: 32 bits of FNV-1a and 20 of a murmur-style mix,
// two unrelated hashes
function idHash(id) {
  let a = 0x811c9dc5, b = 0x9747b28c;
  for (let i = 0; i < id.length; i++) {
    const c = id.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x5bd1e995);
    b ^= b >>> 13;
  }
  return (a >>> 0) * 0x100000 + ((b >>> 0) & 0xfffff) + 1;
}

function record(t, due, id) {
  if (n === arrivals.length) {
    arrivals = grow(arrivals); dues = grow(dues); hashes = grow(hashes);
  }
  arrivals[n] = t; dues[n] = due; hashes[n] = id ? idHash(id) : 0;
  n++;
}

function dupsAndUnique() {
  const s = hashes.slice(0, n).filter((x) => x > 0).sort();
  let dups = 0;
  for (let i = 1; i < s.length; i++) if (s[i] === s[i - 1]) dups++;
  return { unique: s.length - dups, dups };
}

function pct(sorted, p) {
  if (!sorted.length) return null;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1));
  return sorted[i];
}

// Spearman's rho of arrival order against due order (ties by arrival): 1
// when callbacks came oldest first, 0 when in no relation to their dues.
function orderRho(since) {
  const idx = [];
  for (let i = 0; i < n; i++) if (arrivals[i] >= since && dues[i] > 0) idx.push(i);
  const m = idx.length;
  if (m < 2) return null;
  const byArrival = idx.slice().sort((a, b) => arrivals[a] - arrivals[b] || a - b);
  const byDue = idx.slice().sort((a, b) => dues[a] - dues[b] || arrivals[a] - arrivals[b] || a - b);
  const rank = new Int32Array(n);
  byDue.forEach((i, r) => { rank[i] = r; });
  let d2 = 0;
  byArrival.forEach((i, r) => { const d = r - rank[i]; d2 += d * d; });
  return 1 - (6 * d2) / (m * (m * m - 1));
}

function stats(since) {
  const lat = [];
  let first = null, last = null, count = 0;
  for (let i = 0; i < n; i++) {
    const a = arrivals[i];
    if (a < since) continue;
    count++;
    if (first === null || a < first) first = a;
    if (last === null || a > last) last = a;
    if (dues[i] > 0) lat.push(a - dues[i]);
  }
  const s = Float64Array.from(lat).sort();
  const r3 = (x) => (x === null ? null : Math.round(x * 1000) / 1000);
  let sum = 0;
  for (const x of s) sum += x;
  return {
    count, ...dupsAndUnique(), nodue, first: r3(first), last: r3(last),
    with_due: s.length,
    p50: r3(pct(s, 0.5)), p99: r3(pct(s, 0.99)), max: r3(s.length ? s[s.length - 1] : null),
    min: r3(s.length ? s[0] : null), mean: r3(s.length ? sum / s.length : null),
    slow_open: slowOpen, slow_total: slowTotal, conns, now: r3(nowMs()),
  };
}

function json(res, obj) {
  const b = JSON.stringify(obj);
  res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(b) });
  res.end(b);
}

const server = http.createServer((req, res) => {
  const t = nowMs();
  req.resume(); // the body is not needed; drain it so the connection is reused
  const q = req.url.indexOf('?');
  const path = q < 0 ? req.url : req.url.slice(0, q);
  const params = new URLSearchParams(q < 0 ? '' : req.url.slice(q + 1));
  if (path === '/reset') { reset(); return json(res, { ok: true }); }
  if (path === '/count') return json(res, { count: n });
  if (path === '/wait') {
    const want = Number(params.get('n') || 0), end = t + Number(params.get('ms') || 10000);
    const done = () => n >= want || nowMs() >= end || res.destroyed;
    if (done()) return json(res, { count: n });
    const iv = setInterval(() => {
      if (!done()) return;
      clearInterval(iv);
      if (!res.destroyed) json(res, { count: n });
    }, 20);
    return;
  }
  if (path === '/stats') {
    const since = Number(params.get('since') || 0), s = stats(since);
    if (params.get('order')) s.order_rho = orderRho(since);
    return json(res, s);
  }
  if (path === '/slow' || path.startsWith('/slow/')) {
    const ms = Number(params.get('ms') || path.slice(6) || 20000);
    slowOpen++; slowTotal++;
    let done = false;
    const finish = () => { if (!done) { done = true; slowOpen--; } };
    const tm = setTimeout(() => {
      finish();
      if (!res.destroyed) { res.writeHead(200, { 'Content-Length': 2 }); res.end('ok'); }
    }, ms);
    res.on('close', () => { clearTimeout(tm); finish(); });
    return;
  }
  const h = req.headers;
  const due = Number(h['tickd-scheduled-at'] || h['x-due'] || 0);
  const id = h['tickd-task-id'] || h['x-job-id'] || '';
  if (req.socket.benchEpoch !== epoch) { req.socket.benchEpoch = epoch; conns++; }
  record(t, due, id);
  if (!due) nodue++;
  res.writeHead(200, { 'Content-Length': 2 });
  res.end('ok');
});
server.keepAliveTimeout = 65000;
server.headersTimeout = 70000;
server.requestTimeout = 0;
server.maxHeadersCount = 200;
server.on('clientError', (err, sock) => { if (sock.writable) sock.end('HTTP/1.1 400 Bad Request\r\n\r\n'); });
server.listen({ port, host: '127.0.0.1', backlog: 4096 }, () => {
  console.log(`receiver listening on ${server.address().port}`);
});
process.on('SIGTERM', () => process.exit(0));
process.on('SIGINT', () => process.exit(0));

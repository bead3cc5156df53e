// /ui/: what the cluster does now (rates from this replica's /metrics, read
// every 2 s; counts per queue from the API) and over the last hour and day
// (GET /v1/history, the whole cluster).
import uPlot from "./uplot.js";
import { html, useState, useEffect, useRef, useLoad, Loading, ErrorBox, num, Link } from "./ui.js";
import { get, metrics } from "./api.js";

const sum = (m, name) => (m[name] || []).reduce((a, s) => a + s.value, 0);

// quantile q of a Prometheus histogram's bucket counts {le: count}
function quantile(buckets, q) {
  const les = Object.keys(buckets).map((k) => [k === "+Inf" ? Infinity : Number(k), buckets[k]]).sort((a, b) => a[0] - b[0]);
  const total = les.length ? les[les.length - 1][1] : 0;
  if (!total) return null;
  const want = q * total;
  let prevLe = 0, prevCount = 0;
  for (const [le, c] of les) {
    if (c >= want) {
      if (le === Infinity) return prevLe;
      return prevLe + (le - prevLe) * ((want - prevCount) / Math.max(c - prevCount, 1e-9));
    }
    prevLe = le;
    prevCount = c;
  }
  return prevLe;
}

function buckets(m, name) {
  const out = {};
  for (const s of m[name + "_bucket"] || []) out[s.labels.le] = (out[s.labels.le] || 0) + s.value;
  return out;
}

function useLive() {
  const [live, setLive] = useState(null);
  const [error, setError] = useState(null);
  const prev = useRef(null);
  useEffect(() => {
    let stop = false;
    const tick = async () => {
      try {
        const m = await metrics();
        const now = performance.now();
        const cur = {
          at: now,
          succeeded: sum(m, "tickd_tasks_succeeded_total"),
          failed: sum(m, "tickd_tasks_failed_total"),
          retried: sum(m, "tickd_task_retries_total"),
          late: buckets(m, "tickd_callback_lateness_seconds"),
        };
        const p = prev.current;
        const dt = p ? (now - p.at) / 1000 : 0;
        let late = cur.late;
        if (p) {
          late = {};
          for (const k of Object.keys(cur.late)) late[k] = cur.late[k] - (p.late[k] || 0);
          if (!Object.values(late).some((v) => v > 0)) late = cur.late;
        }
        const rate = (k) => (p && dt > 0 ? Math.max(0, (cur[k] - p[k]) / dt) : null);
        prev.current = cur;
        if (!stop) {
          setLive({
            succeeded: rate("succeeded"), failed: rate("failed"), retried: rate("retried"),
            p50: quantile(late, 0.5), p99: quantile(late, 0.99),
            scheduled: sum(m, "tickd_tasks_scheduled"), inFlight: sum(m, "tickd_callbacks_in_flight"),
            waiting: sum(m, "tickd_flow_waiting_tasks"), updated: new Date(),
          });
          setError(null);
        }
      } catch (e) {
        if (!stop) setError(e);
      }
    };
    tick();
    const t = setInterval(tick, 2000);
    return () => {
      stop = true;
      clearInterval(t);
    };
  }, []);
  return { live, error };
}

const ms = (s) => (s === null || s === undefined ? "—" : (s * 1000).toFixed(s < 0.01 ? 2 : 0) + " ms");

function Tile({ label, value, id }) {
  return html`<div class="tile" data-metric=${id}><div class="tile-v">${value}</div><div class="tile-l">${label}</div></div>`;
}

// one uPlot chart; series: [[label, values, colour]]
// dots: draw each point (lateness has a value only for minutes with attempts)
function Chart({ title, x, series, unit, dots }) {
  const ref = useRef(null);
  const plot = useRef(null);
  useEffect(() => {
    const el = ref.current;
    const opts = {
      width: Math.max(300, el.clientWidth || 600), height: 180,
      series: [{}, ...series.map(([label, , stroke]) => ({ label, stroke, width: 1.5, spanGaps: false, points: { show: !!dots, size: 4 }, value: (u, v) => (v === null ? "—" : v.toFixed(2) + " " + unit) }))],
      axes: [{}, { label: unit, size: 60 }],
      legend: { live: false },
    };
    plot.current = new uPlot(opts, [x, ...series.map((s) => s[1])], el);
    return () => plot.current.destroy();
  }, [series.length]);
  useEffect(() => {
    if (plot.current) plot.current.setData([x, ...series.map((s) => s[1])]);
  });
  return html`<figure class="chart"><figcaption>${title}</figcaption><div ref=${ref} role="img" aria-label=${title}></div></figure>`;
}

function History({ window: w, h }) {
  if (!h.data) return html`<${Loading} state=${h} />`;
  const pts = h.data.points;
  const step = h.data.step_ms / 1000;
  const x = pts.map((p) => p.t / 1000);
  const col = (k, div = 1) => pts.map((p) => (p[k] === null || p[k] === undefined ? null : p[k] / div));
  const perQueue = h.data.failed_by_queue;
  return html`<div>
    <div class="charts">
      <${Chart} title=${"Callbacks per second, last " + w} unit="/s" x=${x}
        series=${[["succeeded", col("succeeded", step), "#2e7d32"], ["failed", col("failed", step), "#c62828"], ["retried", col("retried", step), "#ef6c00"], ["expired", col("expired", step), "#6d4c41"]]} />
      <${Chart} title=${"Lateness, last " + w} unit="ms" x=${x} dots
        series=${[["p50", col("lateness_p50_ms"), "#1565c0"], ["p99", col("lateness_p99_ms"), "#6a1b9a"]]} />
    </div>
    <${FailedPerQueue} data=${perQueue} window=${w} />
  </div>`;
}

function FailedPerQueue({ data, window: w }) {
  if (!data.length) return html`<p class="muted small">No task failed in the last ${w}.</p>`;
  return html`<table class="small"><caption>Failed per queue, last ${w}</caption>
    <thead><tr><th scope="col">queue</th><th scope="col">failed</th></tr></thead>
    <tbody>${data.map((r) => html`<tr><td>${r.queue}</td><td class="n">${num(r.failed)}</td></tr>`)}</tbody></table>`;
}

export function Overview() {
  const { live, error } = useLive();
  const queues = useLoad(() => get("/v1/queues?limit=200"), [], 2000);
  const hour = useLoad(() => get("/v1/history?window=1h"), [], 2000);
  const day = useLoad(() => get("/v1/history?window=24h"), [], 60000);
  // callbacks in flight on every replica (each reports every 2 s)
  const cluster = useLoad(() => get("/v1/cluster"), [], 2000);
  const reps = cluster.data && cluster.data.replicas;
  const inFlight = reps && reps.length ? reps.reduce((a, r) => a + r.inflight, 0) : live && live.inFlight;
  const items = (queues.data && queues.data.queues) || [];
  // failures of the last hour: all replicas, from the history (a queue's own
  // failed_last_hour is kept only for queues with settings)
  const byQueue = {};
  for (const r of (hour.data && hour.data.failed_by_queue) || []) byQueue[r.queue] = r.failed;
  const failedHour = hour.data ? hour.data.total.failed : null;
  return html`
    <h1>Overview</h1>
    <${ErrorBox} error=${error} />
    <section aria-labelledby="now-h">
      <h2 id="now-h">Now <span class="muted small">(rates and lateness of this replica's callbacks, counts of all, updated every 2 s${live ? ", " + live.updated.toLocaleTimeString() : ""})</span></h2>
      <div class="tiles" data-live=${live ? live.updated.getTime() : ""}>
        <${Tile} id="succeeded" label="succeeded / s" value=${live ? num(live.succeeded) : "—"} />
        <${Tile} id="failed" label="failed / s" value=${live ? num(live.failed) : "—"} />
        <${Tile} id="retried" label="retried / s" value=${live ? num(live.retried) : "—"} />
        <${Tile} id="p50" label="lateness p50" value=${live ? ms(live.p50) : "—"} />
        <${Tile} id="p99" label="lateness p99" value=${live ? ms(live.p99) : "—"} />
        <${Tile} id="scheduled" label="tasks scheduled" value=${live ? num(live.scheduled) : "—"} />
        <${Tile} id="waiting" label="waiting (held by a limit)" value=${live ? num(live.waiting) : "—"} />
        <${Tile} id="in_flight" label=${"in flight" + (reps && reps.length > 1 ? ", " + reps.length + " replicas" : "")} value=${num(inFlight)} />
        <${Tile} id="failed_hour" label="failed in the last hour" value=${num(failedHour)} />
      </div>
    </section>
    <section aria-labelledby="q-h">
      <h2 id="q-h">Per queue</h2>
      <${Loading} state=${queues} />
      ${queues.data && html`<table>
        <thead><tr><th scope="col">queue</th><th scope="col">scheduled</th><th scope="col">waiting</th><th scope="col">in flight</th><th scope="col">failed, last hour</th><th scope="col">state</th></tr></thead>
        <tbody>${items.map((q) => html`<tr>
          <td><${Link} href=${"/ui/tasks?status=scheduled&queue=" + encodeURIComponent(q.name)}>${q.name}</${Link}></td>
          <td class="n">${num(q.scheduled)}</td><td class="n">${num(q.waiting)}</td><td class="n">${num(q.in_flight)}</td>
          <td class="n">${num(Math.max(q.failed_last_hour || 0, byQueue[q.name] || 0))}</td><td>${q.paused ? "paused" : "running"}</td></tr>`)}</tbody></table>`}
    </section>
    <section aria-labelledby="h1-h"><h2 id="h1-h">Last hour (cluster)</h2><${History} window="1h" h=${hour} /></section>
    <section aria-labelledby="h24-h"><h2 id="h24-h">Last 24 hours (cluster)</h2><${History} window="24h" h=${day} /></section>`;
}

// /ui/tasks (the listing, every filter of GET /v1/tasks, paged by its cursor;
// find by id), /ui/tasks/{id} (one task, its attempts, its actions) and
// /ui/dead-letters (failed tasks, retried one by one or by filter).
import { html, useState, useLoad, Loading, ErrorBox, Link, navigate, taskHref, scheduleHref, localTime, duration, num, Action, StatusBadge, Json, inputToMs, msToInput } from "./ui.js";
import { get, post, del, enc } from "./api.js";

const STATUSES = ["scheduled", "running", "succeeded", "failed", "cancelled", "expired"];
const API_FILTERS = ["status", "key_prefix", "schedule_id", "from", "to", "order", "limit", "cursor"];

function params(search) {
  const q = new URLSearchParams(search);
  const f = {};
  for (const k of [...API_FILTERS, "queue"]) if (q.get(k)) f[k] = q.get(k);
  return f;
}
const qs = (f, keys) => keys.filter((k) => f[k]).map((k) => k + "=" + enc(f[k])).join("&");

function Filters({ f, base, statuses, extra }) {
  const [v, setV] = useState({ ...f });
  const set = (k) => (e) => setV({ ...v, [k]: e.target.value });
  const submit = (e) => {
    e.preventDefault();
    const n = { ...v };
    delete n.cursor;
    navigate(base + "?" + qs(n, [...API_FILTERS, "queue"]));
  };
  return html`<form class="filters" onSubmit=${submit} aria-label="Filters">
    <label>status <select name="status" value=${v.status || statuses[0]} onChange=${set("status")}>
      ${statuses.map((s) => html`<option value=${s} selected=${(v.status || statuses[0]) === s}>${s}</option>`)}</select></label>
    ${extra !== false && html`<label>queue <input name="queue" value=${v.queue || ""} onInput=${set("queue")} size="10" /></label>`}
    <label>key prefix <input name="key_prefix" value=${v.key_prefix || ""} onInput=${set("key_prefix")} size="14" /></label>
    <label>schedule id <input name="schedule_id" value=${v.schedule_id || ""} onInput=${set("schedule_id")} size="14" /></label>
    <label>due from <input type="datetime-local" name="from" value=${msToInput(v.from)} onInput=${(e) => setV({ ...v, from: inputToMs(e.target.value) })} /></label>
    <label>due before <input type="datetime-local" name="to" value=${msToInput(v.to)} onInput=${(e) => setV({ ...v, to: inputToMs(e.target.value) })} /></label>
    <label>order <select name="order" value=${v.order || "oldest"} onChange=${set("order")}>
      <option value="oldest" selected=${v.order !== "newest"}>oldest</option><option value="newest" selected=${v.order === "newest"}>newest</option></select></label>
    <label>per page <select name="limit" value=${v.limit || "100"} onChange=${set("limit")}>
      ${["20", "100", "500", "1000"].map((n) => html`<option value=${n} selected=${(v.limit || "100") === n}>${n}</option>`)}</select></label>
    <button type="submit">Apply</button>
  </form>`;
}

function FindById() {
  const [id, setId] = useState("");
  return html`<form class="find" role="search" onSubmit=${(e) => { e.preventDefault(); if (id.trim()) navigate(taskHref(id.trim())); }}>
    <label>task id <input name="task_id" value=${id} onInput=${(e) => setId(e.target.value)} size="40" /></label>
    <button type="submit">Open</button></form>`;
}

function TaskTable({ items, actions }) {
  if (!items.length) return html`<p class="muted">No task matches.</p>`;
  return html`<table class="tasks">
    <thead><tr><th scope="col">task</th><th scope="col">status</th><th scope="col">queue</th><th scope="col">due</th><th scope="col">attempts</th><th scope="col">last answer</th>${actions && html`<th scope="col">actions</th>`}</tr></thead>
    <tbody>${items.map((t) => html`<tr data-id=${t.id}>
      <td><${Link} href=${taskHref(t.id)}>${t.key || t.id}</${Link}><div class="muted small mono">${t.callback_url}</div></td>
      <td><${StatusBadge} status=${t.status} />${t.waiting && html` <span class="small">waiting: ${t.waiting}</span>`}</td>
      <td>${t.queue || "default"}</td>
      <td class="nowrap">${localTime(t.execute_at)}</td>
      <td class="n">${num(t.attempts)}</td>
      <td class="small">${t.last_status_code ? t.last_status_code + " " : ""}${t.last_error || ""}</td>
      ${actions && html`<td>${actions(t)}</td>`}
    </tr>`)}</tbody></table>`;
}

function Pager({ base, f, next }) {
  return html`<nav class="pager" aria-label="Pages">
    ${f.cursor && html`<${Link} href=${base + "?" + qs({ ...f, cursor: "" }, [...API_FILTERS, "queue"])}>First page</${Link}>`}
    ${next && html`<${Link} href=${base + "?" + qs({ ...f, cursor: next }, [...API_FILTERS, "queue"])} rel="next">Next page</${Link}>`}
  </nav>`;
}

function listPath(f) {
  return "/v1/tasks?" + qs({ status: "scheduled", ...f }, API_FILTERS);
}

export function TaskList({ search }) {
  const f = params(search);
  const list = useLoad(() => get(listPath(f)), [search], 5000);
  let items = (list.data && list.data.tasks) || [];
  if (f.queue) items = items.filter((t) => (t.queue || "default") === f.queue);
  return html`<h1>Tasks</h1>
    <${FindById} />
    <${Filters} f=${f} base="/ui/tasks" statuses=${STATUSES} />
    ${f.queue && html`<p class="muted small">queue is applied to each page the API returns.</p>`}
    <${Loading} state=${list} />
    <div class="results">${list.data && html`<div><${TaskTable} items=${items} /><${Pager} base="/ui/tasks" f=${f} next=${list.data.next_cursor} /></div>`}</div>`;
}

function Body({ value }) {
  if (value === undefined || value === null) return html`<p class="muted">no body</p>`;
  if (typeof value === "string") {
    try {
      return html`<${Json} value=${JSON.parse(value)} />`;
    } catch {
      return html`<pre class="json">${value}</pre>`;
    }
  }
  return html`<${Json} value=${value} />`;
}

function Headers({ header }) {
  const rows = Object.entries(header || {});
  if (!rows.length) return html`<p class="muted">no headers</p>`;
  return html`<table class="small kv"><tbody>${rows.map(([k, v]) => html`<tr><th scope="row" class="mono">${k}</th><td class="mono">${v}</td></tr>`)}</tbody></table>`;
}

export function TaskDetail({ id, admin }) {
  const t = useLoad(() => get("/v1/tasks/" + enc(id)), [id], 2000);
  const task = t.data;
  if (!task) return html`<h1>Task</h1><p class="mono">${id}</p><${Loading} state=${t} />`;
  const attempts = task.attempt_history || [];
  const st = task.status;
  return html`<h1>Task <span class="mono small">${task.key || task.id}</span></h1>
    <${ErrorBox} error=${t.error} />
    <dl class="facts">
      <dt>id</dt><dd class="mono">${task.id}</dd>
      <dt>status</dt><dd><${StatusBadge} status=${st} />${task.waiting && html` <span>waiting: ${task.waiting}</span>`}</dd>
      <dt>callback</dt><dd class="mono">${task.method || "POST"} ${task.callback_url}</dd>
      <dt>queue</dt><dd>${task.queue || "default"}</dd>
      <dt>due</dt><dd>${localTime(task.execute_at)}</dd>
      ${task.next_attempt_at && html`<dt>next attempt</dt><dd>${localTime(task.next_attempt_at)}</dd>`}
      ${task.expires_at && html`<dt>expires</dt><dd>${localTime(task.expires_at)}</dd>`}
      <dt>attempts</dt><dd>${num(task.attempts)} of ${num(task.retry && task.retry.max_attempts)}</dd>
      ${task.last_error && html`<dt>last error</dt><dd>${task.last_status_code ? task.last_status_code + " " : ""}${task.last_error}</dd>`}
      ${task.finished_at && html`<dt>finished</dt><dd>${localTime(task.finished_at)}</dd>`}
      ${task.schedule_id && html`<dt>schedule</dt><dd><${Link} href=${scheduleHref(task.schedule_id)}>${task.schedule_id}</${Link}></dd>`}
    </dl>
    ${admin && html`<div class="actions" aria-label="Actions">
      <${Action} label="Retry" question=${"Retry task " + task.id + " now?"} disabled=${!["failed", "cancelled"].includes(st)}
        run=${() => post("/v1/tasks/" + enc(task.id) + "/retry")} done=${() => (t.reload(), "retried")} />
      <${Action} label="Run now" question=${"Run task " + task.id + " now?"} disabled=${st !== "scheduled"}
        run=${() => post("/v1/tasks/" + enc(task.id) + "/run")} done=${() => (t.reload(), "made due now")} />
      <${Action} label="Cancel" danger question=${"Cancel task " + task.id + "? It will never fire."} disabled=${st !== "scheduled"}
        run=${() => del("/v1/tasks/" + enc(task.id))} done=${() => (t.reload(), "cancelled")} />
    </div>`}
    <h2>Headers</h2><${Headers} header=${task.header} />
    <h2>Body</h2><${Body} value=${task.req} />
    <h2>Attempts</h2>
    ${attempts.length ? html`<table class="attempts">
      <thead><tr><th scope="col">#</th><th scope="col">at</th><th scope="col">took</th><th scope="col">status</th><th scope="col">error</th><th scope="col">answer body</th></tr></thead>
      <tbody>${attempts.map((a, i) => html`<tr>
        <td class="n">${i + 1}</td><td class="nowrap">${localTime(a.at)}</td><td class="n">${duration(a.took_ms)}</td>
        <td class="n">${a.status_code || "—"}</td><td class="small">${a.error || ""}</td><td>${a.body ? html`<pre class="answer">${a.body}</pre>` : "—"}</td></tr>`)}</tbody></table>`
      : html`<p class="muted">No attempt yet.</p>`}
    ${task.on_failure && html`<h2>On failure</h2><p class="mono">${task.on_failure.method || "POST"} ${task.on_failure.callback_url}</p><${Headers} header=${task.on_failure.header} />`}`;
}

function RetryAll({ f }) {
  const [progress, setProgress] = useState(null);
  const run = async () => {
    let total = 0, cursor = null;
    setProgress({ total: 0, running: true });
    try {
      do {
        const body = { status: f.status || "failed", limit: 1000 };
        for (const k of ["key_prefix", "schedule_id", "from", "to"]) if (f[k]) body[k] = /^\d+$/.test(f[k]) && k !== "key_prefix" && k !== "schedule_id" ? Number(f[k]) : f[k];
        if (cursor) body.cursor = cursor;
        const r = await post("/v1/tasks/retry", body);
        total += r.retried;
        cursor = r.next_cursor;
        setProgress({ total, running: !!cursor });
      } while (cursor);
    } catch (e) {
      setProgress({ total, running: false, error: e });
      throw e;
    }
    return total;
  };
  return html`<${Action} label="Retry all matching" question="Retry every task matching these filters?" run=${run} done=${(n) => "retried " + n} />
    ${progress && html`<span class="progress" role="status" aria-live="polite">${progress.running ? "retrying… " : ""}${num(progress.total)} retried</span>`}`;
}

export function DeadLetters({ search, admin }) {
  const f = { status: "failed", ...params(search) };
  const list = useLoad(() => get(listPath(f)), [search], 5000);
  const stats = useLoad(() => get("/v1/stats"), []);
  const keep = stats.data && stats.data.failed_retention_ms;
  return html`<h1>Dead letters</h1>
    <p>Tasks that failed for good (or were cancelled). They are kept for${" "}<strong data-retention=${keep || ""}>${keep ? duration(keep) : "—"}</strong> (<code>scheduler.failed_retention_ms</code>), then dropped.</p>
    <${Filters} f=${f} base="/ui/dead-letters" statuses=${["failed", "cancelled"]} extra=${false} />
    ${admin && html`<div class="actions"><${RetryAll} f=${f} /></div>`}
    <${Loading} state=${list} />
    <div class="results">${list.data && html`<div><${TaskTable} items=${list.data.tasks || []} actions=${admin && ((t) => html`<${Action} label="Retry"
        question=${"Retry task " + t.id + " now?"} run=${() => post("/v1/tasks/" + enc(t.id) + "/retry")} done=${() => (list.reload(), "retried")} />`)} />
      <${Pager} base="/ui/dead-letters" f=${f} next=${list.data.next_cursor} /></div>`}</div>`;
}

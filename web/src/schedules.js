// /ui/schedules (the list), /ui/schedules/{id} (one: next runs in its zone and
// the viewer's, pause, resume, delete, its runs as tasks) and
// /ui/schedules/new (a form whose next runs are previewed by the server).
import { html, useState, useEffect, useLoad, Loading, ErrorBox, Link, navigate, taskHref, scheduleHref, localTime, zoneTime, duration, num, Action, StatusBadge } from "./ui.js";
import { get, post, del, enc } from "./api.js";

const rule = (s) => (s.cron ? "cron " + s.cron + " (" + (s.tz || "UTC") + ")" : "every " + duration(s.every_ms));

function Runs({ runs, tz, label }) {
  if (!runs || !runs.length) return html`<p class="muted">No run to come.</p>`;
  return html`<table class="runs small" aria-label=${label || "Next runs"}>
    <thead><tr><th scope="col">in ${tz || "UTC"}</th><th scope="col">your time</th></tr></thead>
    <tbody>${runs.map((r) => html`<tr data-at=${r.at}><td class="mono">${r.time || zoneTime(r.at, tz || "UTC")}</td><td class="mono">${localTime(r.at)}</td></tr>`)}</tbody></table>`;
}

export function ScheduleList({ search, admin }) {
  const cursor = new URLSearchParams(search).get("cursor") || "";
  const list = useLoad(() => get("/v1/schedules?limit=100" + (cursor ? "&cursor=" + enc(cursor) : "")), [cursor], 5000);
  const items = (list.data && list.data.schedules) || [];
  return html`<h1>Schedules</h1>
    ${admin && html`<p><${Link} href="/ui/schedules/new" class="button">New schedule</${Link}></p>`}
    <${Loading} state=${list} />
    <div class="results">${list.data && (items.length ? html`<table>
      <thead><tr><th scope="col">schedule</th><th scope="col">rule</th><th scope="col">state</th><th scope="col">next run</th><th scope="col">runs</th><th scope="col">skipped</th></tr></thead>
      <tbody>${items.map((s) => html`<tr>
        <td><${Link} href=${scheduleHref(s.id)}>${s.id}</${Link}><div class="muted small mono">${s.task && s.task.callback_url}</div></td>
        <td class="mono small">${rule(s)}</td><td><${StatusBadge} status=${s.state} /></td>
        <td class="small">${s.next_runs && s.next_runs[0] ? html`${s.next_runs[0].time}<br /><span class="muted">${localTime(s.next_runs[0].at)}</span>` : "—"}</td>
        <td class="n">${num(s.runs)}</td><td class="n">${num(s.skipped_runs)}</td></tr>`)}</tbody></table>` : html`<p class="muted">No schedule.</p>`)}</div>
    ${list.data && list.data.next_cursor && html`<nav class="pager" aria-label="Pages"><${Link} href=${"/ui/schedules?cursor=" + enc(list.data.next_cursor)}>Next page</${Link}></nav>`}`;
}

function ScheduleRuns({ id }) {
  const runs = useLoad(async () => {
    const all = await Promise.all(["scheduled", "running", "succeeded", "failed", "cancelled", "expired"].map((st) =>
      get("/v1/tasks?status=" + st + "&schedule_id=" + enc(id) + "&limit=20&order=newest").then((r) => r.tasks || [], () => [])));
    return all.flat().sort((a, b) => b.execute_at - a.execute_at).slice(0, 40);
  }, [id], 5000);
  if (!runs.data) return html`<${Loading} state=${runs} />`;
  if (!runs.data.length) return html`<p class="muted">No run kept.</p>`;
  return html`<table class="small"><thead><tr><th scope="col">run</th><th scope="col">status</th><th scope="col">time</th><th scope="col">attempts</th></tr></thead>
    <tbody>${runs.data.map((t) => html`<tr><td><${Link} href=${taskHref(t.id)} class="mono">${t.id}</${Link}></td><td><${StatusBadge} status=${t.status} /></td>
      <td>${localTime(t.execute_at)}</td><td class="n">${num(t.attempts)}</td></tr>`)}</tbody></table>`;
}

export function ScheduleDetail({ id, admin }) {
  const s = useLoad(() => get("/v1/schedules/" + enc(id)), [id], 5000);
  const sc = s.data;
  if (!sc) return html`<h1>Schedule</h1><p class="mono">${id}</p><${Loading} state=${s} />`;
  return html`<h1>Schedule <span class="mono small">${sc.id}</span></h1>
    <${ErrorBox} error=${s.error} />
    <dl class="facts">
      <dt>rule</dt><dd class="mono">${rule(sc)}</dd>
      <dt>state</dt><dd><${StatusBadge} status=${sc.state} /></dd>
      <dt>callback</dt><dd class="mono">${(sc.task && sc.task.method) || "POST"} ${sc.task && sc.task.callback_url}</dd>
      <dt>runs made</dt><dd>${num(sc.runs)}${sc.times ? " of " + num(sc.times) : ""}</dd>
      <dt>runs skipped</dt><dd>${num(sc.skipped_runs)} (catch_up ${sc.catch_up || "latest"})</dd>
      ${sc.end_at && html`<dt>ends</dt><dd>${localTime(sc.end_at)}</dd>`}
      ${sc.last_run && html`<dt>last run</dt><dd><${Link} href=${taskHref(sc.last_run.task_id)} class="mono">${sc.last_run.task_id}</${Link}> <${StatusBadge} status=${sc.last_run.status} /></dd>`}
    </dl>
    ${admin && html`<div class="actions">
      ${sc.state === "paused"
        ? html`<${Action} label="Resume" question=${"Resume schedule " + sc.id + "? Runs missed while paused are not made."} run=${() => post("/v1/schedules/" + enc(sc.id) + "/resume")} done=${() => (s.reload(), "resumed")} />`
        : html`<${Action} label="Pause" question=${"Pause schedule " + sc.id + "?"} disabled=${sc.state === "completed"} run=${() => post("/v1/schedules/" + enc(sc.id) + "/pause")} done=${() => (s.reload(), "paused")} />`}
      <${Action} label="Delete" danger question=${"Delete schedule " + sc.id + "? It makes no further run."} run=${() => del("/v1/schedules/" + enc(sc.id))} done=${() => (navigate("/ui/schedules"), "deleted")} />
    </div>`}
    <h2>Next runs</h2><${Runs} runs=${sc.next_runs} tz=${sc.cron ? sc.tz || "UTC" : "UTC"} />
    <h2>Its runs</h2><${ScheduleRuns} id=${sc.id} />`;
}

function previewQuery(v) {
  const q = new URLSearchParams();
  if (v.kind === "cron") {
    q.set("cron", v.cron);
    q.set("tz", v.tz || "UTC");
  } else {
    q.set("every_ms", v.every_ms);
    if (v.start_at) q.set("start_at", v.start_at);
  }
  if (v.times) q.set("times", v.times);
  if (v.end_at) q.set("end_at", v.end_at);
  return q.toString();
}

export function ScheduleNew({ admin }) {
  const [v, setV] = useState({ kind: "cron", key: "", cron: "*/5 * * * *", tz: Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC",
    every_ms: "60000", times: "", callback_url: "", method: "POST", queue: "", body: "" });
  // the preview of query q: shown only while q is the form's (a preview of
  // what was typed before would show under the new zone's heading)
  const [preview, setPreview] = useState({ q: null, runs: null, error: null });
  const [error, setError] = useState(null);
  const set = (k) => (e) => setV({ ...v, [k]: e.target.value });
  const q = previewQuery(v);
  useEffect(() => {
    let live = true;
    const t = setTimeout(() => {
      get("/v1/schedules:preview?" + q).then(
        (r) => live && setPreview({ q, runs: r.next_runs || [], error: null }),
        (e) => live && setPreview({ q, runs: null, error: e }));
    }, 250);
    return () => { live = false; clearTimeout(t); };
  }, [q]);
  const submit = async (e) => {
    e.preventDefault();
    setError(null);
    const task = { callback_url: v.callback_url, method: v.method };
    if (v.queue) task.queue = v.queue;
    if (v.body.trim()) {
      try { task.req = JSON.parse(v.body); } catch { task.req = v.body; }
    }
    const body = { task };
    if (v.key) body.key = v.key;
    if (v.kind === "cron") { body.cron = v.cron; body.tz = v.tz || "UTC"; } else body.every_ms = Number(v.every_ms);
    if (v.times) body.times = Number(v.times);
    try {
      const sc = await post("/v1/schedules", body);
      navigate(scheduleHref(sc.id));
    } catch (err) {
      setError(err);
    }
  };
  if (!admin) return html`<h1>New schedule</h1><p>A read-only token cannot create schedules.</p>`;
  return html`<h1>New schedule</h1>
    <form class="form" onSubmit=${submit} aria-label="New schedule">
      <label>key <input name="key" value=${v.key} onInput=${set("key")} placeholder="daily-report (optional)" /></label>
      <fieldset><legend>when</legend>
        <label><input type="radio" name="kind" value="cron" checked=${v.kind === "cron"} onChange=${set("kind")} /> cron</label>
        <label><input type="radio" name="kind" value="every" checked=${v.kind === "every"} onChange=${set("kind")} /> interval</label>
        ${v.kind === "cron" ? html`
          <label>cron expression <input name="cron" class="mono" value=${v.cron} onInput=${set("cron")} required /></label>
          <label>time zone <input name="tz" value=${v.tz} onInput=${set("tz")} /></label>`
        : html`<label>every (ms) <input name="every_ms" type="number" min="1000" value=${v.every_ms} onInput=${set("every_ms")} required /></label>`}
        <label>runs in all <input name="times" type="number" min="1" value=${v.times} onInput=${set("times")} placeholder="for ever" /></label>
      </fieldset>
      <fieldset><legend>task</legend>
        <label>callback URL <input name="callback_url" type="url" value=${v.callback_url} onInput=${set("callback_url")} required /></label>
        <label>method <select name="method" value=${v.method} onChange=${set("method")}>${["POST", "GET", "PUT", "PATCH", "DELETE"].map((m) => html`<option value=${m} selected=${v.method === m}>${m}</option>`)}</select></label>
        <label>queue <input name="queue" value=${v.queue} onInput=${set("queue")} placeholder="default" /></label>
        <label>body (JSON or text) <textarea name="body" rows="4" value=${v.body} onInput=${set("body")}></textarea></label>
      </fieldset>
      <section class="preview" aria-live="polite" aria-labelledby="preview-h">
        <h2 id="preview-h">Next runs</h2>
        ${preview.q !== q ? html`<p class="muted">…</p>`
          : preview.error ? html`<p class="error" role="alert">${preview.error.message}</p>`
          : preview.runs ? html`<${Runs} runs=${preview.runs} tz=${v.kind === "cron" ? v.tz || "UTC" : "UTC"} label="Previewed runs" />` : html`<p class="muted">…</p>`}
      </section>
      <${ErrorBox} error=${error} />
      <button type="submit">Create schedule</button>
    </form>`;
}

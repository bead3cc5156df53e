// /ui/queues: queues and destinations with their limits and counts; edit the
// limits, pause and resume a queue.
import { html, useState, useLoad, Loading, Link, num, Action } from "./ui.js";
import { get, put, post, enc } from "./api.js";

function limitBody(v) {
  const b = {};
  if (v.rate !== "") b.rate = Number(v.rate);
  if (v.burst !== "" && v.rate !== "") b.burst = Number(v.burst);
  if (v.max_concurrency !== "") b.max_concurrency = Number(v.max_concurrency);
  return b;
}

function EditLimits({ kind, item, onSaved }) {
  const [v, setV] = useState({ rate: item.rate ?? "", burst: item.burst ?? "", max_concurrency: item.max_concurrency ?? "" });
  const [msg, setMsg] = useState(null);
  const set = (k) => (e) => setV({ ...v, [k]: e.target.value });
  const save = async (e) => {
    e.preventDefault();
    if (!window.confirm("Set the limits of " + kind + " " + item.name + "?")) return;
    try {
      const body = limitBody(v);
      if (kind === "queue" && item.paused) body.paused = true;
      await put("/v1/" + (kind === "queue" ? "queues/" : "destinations/") + enc(item.name), body);
      setMsg({ ok: true, text: "saved" });
      onSaved();
    } catch (err) {
      setMsg({ ok: false, text: (err.status || "") + " " + err.message });
    }
  };
  const idp = kind + "-" + item.name;
  return html`<form class="limits" onSubmit=${save} aria-label=${"Limits of " + kind + " " + item.name}>
    <label>rate/s <input name="rate" id=${idp + "-rate"} type="number" step="any" min="0" size="6" value=${v.rate} onInput=${set("rate")} /></label>
    <label>burst <input name="burst" type="number" min="1" size="4" value=${v.burst} onInput=${set("burst")} /></label>
    <label>max in flight <input name="max_concurrency" type="number" min="1" size="4" value=${v.max_concurrency} onInput=${set("max_concurrency")} /></label>
    <button type="submit">Save</button>
    ${msg && html`<span role="status" class=${msg.ok ? "ok" : "error"}>${msg.text}</span>`}
  </form>`;
}

export function Queues({ admin }) {
  const queues = useLoad(() => get("/v1/queues?limit=200"), [], 2000);
  const dests = useLoad(() => get("/v1/destinations?limit=200"), [], 5000);
  const qs = (queues.data && queues.data.queues) || [];
  const ds = (dests.data && dests.data.destinations) || [];
  return html`<h1>Queues</h1>
    <${Loading} state=${queues} />
    ${queues.data && html`<table class="queues">
      <thead><tr><th scope="col">queue</th><th scope="col">state</th><th scope="col">scheduled</th><th scope="col">waiting</th><th scope="col">in flight</th><th scope="col">failed, last hour</th><th scope="col">limits</th>${admin && html`<th scope="col">actions</th>`}</tr></thead>
      <tbody>${qs.map((q) => html`<tr id=${"q-" + q.name} data-queue=${q.name}>
        <th scope="row">${q.name}</th><td class="state">${q.paused ? "paused" : "running"}</td>
        <td class="n">${num(q.scheduled)}</td><td class="n waiting"><${Link} href=${"/ui/tasks?status=scheduled&queue=" + enc(q.name)} title=${"tasks of " + q.name}>${num(q.waiting)}</${Link}></td><td class="n">${num(q.in_flight)}</td>
        <td class="n">${num(q.failed_last_hour)}</td>
        <td>${admin ? html`<${EditLimits} kind="queue" item=${q} onSaved=${queues.reload} />`
          : html`<span class="small">rate ${q.rate ?? "—"}, burst ${q.burst ?? "—"}, max ${q.max_concurrency ?? "—"}</span>`}</td>
        ${admin && html`<td>${q.paused
          ? html`<${Action} label="Resume" question=${"Resume queue " + q.name + "? Its waiting tasks go, oldest first."} run=${() => post("/v1/queues/" + enc(q.name) + "/resume")} done=${() => (queues.reload(), "resumed")} />`
          : html`<${Action} label="Pause" question=${"Pause queue " + q.name + "? None of its tasks fires until resumed."} run=${() => post("/v1/queues/" + enc(q.name) + "/pause")} done=${() => (queues.reload(), "paused")} />`}</td>`}
      </tr>`)}</tbody></table>`}
    <h2>Destinations</h2>
    ${dests.error && dests.error.status === 501 ? html`<p class="muted">This store has no flow control.</p>` : html`<${Loading} state=${dests} />`}
    ${dests.data && (ds.length ? html`<table>
      <thead><tr><th scope="col">destination</th><th scope="col">in flight</th><th scope="col">held until</th><th scope="col">limits</th></tr></thead>
      <tbody>${ds.map((d) => html`<tr><th scope="row" class="mono">${d.name}</th><td class="n">${num(d.in_flight)}</td>
        <td class="small">${d.held_until ? new Date(d.held_until).toLocaleString() : "—"}</td>
        <td>${admin ? html`<${EditLimits} kind="destination" item=${d} onSaved=${dests.reload} />` : html`<span class="small">rate ${d.rate ?? "—"}, max ${d.max_concurrency ?? "—"}</span>`}</td></tr>`)}</tbody></table>`
      : html`<p class="muted">No destination has limits.</p>`)}
`;
}

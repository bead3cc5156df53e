// /ui/cluster: the replicas alive and the Redis nodes (GET /v1/cluster).
import { html, useLoad, Loading, localTime, duration, num } from "./ui.js";
import { get } from "./api.js";

const mib = (b) => (b === null || b === undefined ? "—" : (b / 1048576).toFixed(1) + " MiB");

export function Cluster() {
  const c = useLoad(() => get("/v1/cluster"), [], 2000);
  if (!c.data) {
    if (c.error && c.error.status === 404) return html`<h1>Cluster</h1><p class="muted">This tickd does not tell its cluster (GET /v1/cluster).</p>`;
    return html`<h1>Cluster</h1><${Loading} state=${c} />`;
  }
  const reps = c.data.replicas || [];
  const nodes = c.data.nodes || [];
  return html`<h1>Cluster</h1>
    <p class="muted">Store: ${c.data.store}${c.data.refusing_adds ? html`; <strong class="error">refusing adds: ${c.data.refusing_adds}</strong>` : ""}${c.data.data_lost ? html`; <strong class="error">data lost ${num(c.data.data_lost)} times</strong>` : ""}</p>
    <h2>Replicas alive (${reps.length})</h2>
    ${c.data.replicas_error && html`<p class="error" role="alert">${c.data.replicas_error}</p>`}
    <table><thead><tr><th scope="col">id</th><th scope="col">API address</th><th scope="col">version</th><th scope="col">started</th><th scope="col">up</th><th scope="col">in flight</th><th scope="col">held</th><th scope="col">last report</th></tr></thead>
    <tbody>${reps.map((r) => html`<tr data-replica=${r.id}><td class="mono">${r.id}</td><td class="mono">${r.listen}</td><td>${r.version}</td>
      <td>${localTime(r.started_at)}</td><td>${duration(r.uptime_ms)}</td><td class="n">${num(r.inflight)}</td><td class="n">${num(r.held)}</td>
      <td>${c.data.now && r.seen_at ? duration(Math.max(0, c.data.now - r.seen_at)) + " ago" : "—"}</td></tr>`)}</tbody></table>
    <h2>Redis nodes (${nodes.length})</h2>
    <table><thead><tr><th scope="col">address</th><th scope="col">role</th><th scope="col">health</th><th scope="col">version</th><th scope="col">memory</th><th scope="col">maxmemory</th><th scope="col">policy</th></tr></thead>
    <tbody>${nodes.map((n) => html`<tr data-node=${n.address}><td class="mono">${n.address}${n.primary ? html`<div class="small muted">of ${n.primary}</div>` : ""}</td><td>${n.role}</td>
      <td><span class=${"badge " + (n.reachable && !n.refusing ? "s-succeeded" : "s-failed")}>${n.reachable ? (n.refusing ? "refusing writes" : "reachable") : "unreachable"}</span>
        ${(n.error || n.refusing) && html`<div class="small">${n.error || n.refusing}</div>`}</td>
      <td>${n.version || "—"}</td><td class="n">${mib(n.used_memory)}</td><td class="n">${n.maxmemory ? mib(n.maxmemory) : "no limit"}</td><td>${n.maxmemory_policy || "—"}</td></tr>`)}</tbody></table>`;
}

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
  const nodes = c.data.redis || c.data.nodes || [];
  return html`<h1>Cluster</h1>
    <h2>Replicas alive (${reps.length})</h2>
    <table><thead><tr><th scope="col">id</th><th scope="col">address</th><th scope="col">version</th><th scope="col">started</th><th scope="col">up</th><th scope="col">in flight</th></tr></thead>
    <tbody>${reps.map((r) => html`<tr><td class="mono">${r.id}</td><td class="mono">${r.address}</td><td>${r.version}</td>
      <td>${localTime(r.started_at)}</td><td>${duration(r.uptime_ms ?? (r.uptime !== undefined ? r.uptime * 1000 : null))}</td><td class="n">${num(r.in_flight)}</td></tr>`)}</tbody></table>
    <h2>Redis nodes (${nodes.length})</h2>
    <table><thead><tr><th scope="col">address</th><th scope="col">role</th><th scope="col">health</th><th scope="col">memory</th><th scope="col">maxmemory</th><th scope="col">policy</th></tr></thead>
    <tbody>${nodes.map((n) => html`<tr><td class="mono">${n.address}</td><td>${n.role}</td>
      <td><span class=${"badge " + (n.reachable ? "s-succeeded" : "s-failed")}>${n.reachable ? "reachable" : "unreachable"}</span></td>
      <td class="n">${mib(n.used_memory)}</td><td class="n">${n.maxmemory ? mib(n.maxmemory) : "no limit"}</td><td>${n.policy || n.maxmemory_policy || "—"}</td></tr>`)}</tbody></table>`;
}

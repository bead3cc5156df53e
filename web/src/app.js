// The console's shell: navigation, the token prompt, the viewer's scope, and
// the view each /ui/... URL names.
import { render } from "./preact-htm.js";
import { html, useState, useEffect, Link, onRoute } from "./ui.js";
import { get, token, onUnauthorized } from "./api.js";
import { Overview } from "./overview.js";
import { TaskList, TaskDetail, DeadLetters } from "./tasks.js";
import { ScheduleList, ScheduleDetail, ScheduleNew } from "./schedules.js";
import { Queues } from "./queues.js";
import { Cluster } from "./cluster.js";

const NAV = [
  ["/ui/", "Overview"],
  ["/ui/tasks", "Tasks"],
  ["/ui/dead-letters", "Dead letters"],
  ["/ui/schedules", "Schedules"],
  ["/ui/queues", "Queues"],
  ["/ui/cluster", "Cluster"],
];

function route(path) {
  const p = path.replace(/\/+$/, "") || "/ui";
  let m;
  if (p === "/ui") return [Overview, {}];
  if (p === "/ui/tasks") return [TaskList, {}];
  if ((m = /^\/ui\/tasks\/(.+)$/.exec(p))) return [TaskDetail, { id: decodeURIComponent(m[1]) }];
  if (p === "/ui/dead-letters") return [DeadLetters, {}];
  if (p === "/ui/schedules") return [ScheduleList, {}];
  if (p === "/ui/schedules/new") return [ScheduleNew, {}];
  if ((m = /^\/ui\/schedules\/(.+)$/.exec(p))) return [ScheduleDetail, { id: decodeURIComponent(m[1]) }];
  if (p === "/ui/queues") return [Queues, {}];
  if (p === "/ui/cluster") return [Cluster, {}];
  return [NotFound, {}];
}

function NotFound() {
  return html`<h1>Not found</h1><p>No view at this address. <${Link} href="/ui/">Overview</${Link}></p>`;
}

function TokenForm({ onDone }) {
  const [value, setValue] = useState("");
  const submit = (e) => {
    e.preventDefault();
    token.set(value.trim());
    onDone();
  };
  return html`<div class="token-box" role="dialog" aria-modal="true" aria-labelledby="token-title">
    <form onSubmit=${submit}>
      <h2 id="token-title">API token</h2>
      <p>This tickd asks for a token (<code>server.api_token</code>, or a read-only one of <code>server.read_tokens</code>).
        It is kept in this tab only (sessionStorage) and sent as <code>Authorization: Bearer</code>.</p>
      <label for="token-input">Token</label>
      <input id="token-input" type="password" autocomplete="off" value=${value} onInput=${(e) => setValue(e.target.value)} required />
      <button type="submit">Use this token</button>
    </form>
  </div>`;
}

function App() {
  const [path, setPath] = useState(location.pathname);
  const [search, setSearch] = useState(location.search);
  const [needToken, setNeedToken] = useState(false);
  const [scope, setScope] = useState(null);
  const [epoch, setEpoch] = useState(0);

  useEffect(() => onRoute(() => {
    setPath(location.pathname);
    setSearch(location.search);
  }), []);
  useEffect(() => onUnauthorized(() => setNeedToken(true)), []);
  useEffect(() => {
    get("/v1/whoami").then((w) => setScope(w.scope), () => {});
  }, [epoch]);

  const [View, props] = route(path);
  const admin = scope === "admin" || scope === "open";
  const here = (href) => (href === "/ui/" ? path === "/ui/" || path === "/ui" : path.startsWith(href));
  return html`
    <header class="top">
      <a class="brand" href="/ui/">tickd</a>
      <nav aria-label="Views">
        ${NAV.map(([href, label]) => html`<${Link} href=${href} aria-current=${here(href) ? "page" : undefined}>${label}</${Link}>`)}
      </nav>
      <span class="scope" data-scope=${scope || ""}>
        ${scope === "read" ? "read-only" : scope === "admin" ? "full access" : scope === "open" ? "open (no token)" : ""}
        ${token.get() && html` <button type="button" class="link" onClick=${() => { token.set(""); location.reload(); }}>forget token</button>`}
      </span>
    </header>
    <main id="main" key=${epoch + path}>
      ${needToken ? html`<${TokenForm} onDone=${() => { setNeedToken(false); setEpoch(epoch + 1); }} />`
        : html`<${View} ...${props} search=${search} admin=${admin} />`}
    </main>`;
}

const root = document.getElementById("app");
root.textContent = "";
render(html`<${App} />`, root);

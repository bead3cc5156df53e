// Pieces every view uses: navigation by URL, polling, times, errors, confirm.
// Data from the API is attacker-controlled text: it is only ever rendered as
// text nodes by preact (never as HTML), and links built from it are checked.
import { html, useState, useEffect, useRef, useCallback } from "./preact-htm.js";

export { html, useState, useEffect, useRef, useCallback };

const routeListeners = new Set();
export function onRoute(fn) {
  routeListeners.add(fn);
  return () => routeListeners.delete(fn);
}
export function navigate(url, replace) {
  if (replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
  routeListeners.forEach((fn) => fn());
  window.scrollTo(0, 0);
}
window.addEventListener("popstate", () => routeListeners.forEach((fn) => fn()));

// An in-app link: a real href (open in a new tab works), the app moves itself.
export function Link({ href, children, ...rest }) {
  const click = (e) => {
    if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    navigate(href);
  };
  return html`<a href=${href} onClick=${click} ...${rest}>${children}</a>`;
}

export const taskHref = (id) => "/ui/tasks/" + encodeURIComponent(id).replace(/%3A/gi, ":");
export const scheduleHref = (id) => "/ui/schedules/" + encodeURIComponent(id).replace(/%3A/gi, ":");

// Runs load() now, then every periodMs (0: once) while mounted; deps restart it.
export function useLoad(load, deps, periodMs = 0) {
  const [state, setState] = useState({ data: null, error: null, loading: true });
  const gen = useRef(0);
  const reload = useCallback(async () => {
    const mine = ++gen.current;
    try {
      const data = await load();
      if (mine === gen.current) setState({ data, error: null, loading: false });
    } catch (error) {
      if (mine === gen.current) setState((s) => ({ data: s.data, error, loading: false }));
    }
  }, deps);
  useEffect(() => {
    setState({ data: null, error: null, loading: true });
    reload();
    if (!periodMs) return () => gen.current++;
    let timer = setInterval(reload, periodMs);
    return () => {
      clearInterval(timer);
      gen.current++;
    };
  }, [reload]);
  return { ...state, reload };
}

export function ErrorBox({ error }) {
  if (!error) return null;
  return html`<p class="error" role="alert">${error.status ? error.status + " " : ""}${error.message}</p>`;
}

export function Loading({ state }) {
  if (state.error) return html`<${ErrorBox} error=${state.error} />`;
  if (state.loading && !state.data) return html`<p class="muted" aria-busy="true">Loading…</p>`;
  return null;
}

const pad = (n, w = 2) => String(n).padStart(w, "0");
// A Unix ms time as the viewer's local time, with its offset
export function localTime(ms) {
  if (ms === null || ms === undefined || ms === "") return "—";
  const d = new Date(Number(ms));
  if (isNaN(d)) return String(ms);
  const off = -d.getTimezoneOffset();
  const sign = off >= 0 ? "+" : "-";
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)} ${sign}${pad(Math.floor(Math.abs(off) / 60))}:${pad(Math.abs(off) % 60)}`;
}
// A Unix ms time in an IANA zone, as the Intl API has it
export function zoneTime(ms, tz) {
  try {
    return new Intl.DateTimeFormat("en-CA", {
      timeZone: tz, year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit",
      minute: "2-digit", second: "2-digit", hourCycle: "h23", timeZoneName: "short",
    }).format(new Date(Number(ms)));
  } catch {
    return localTime(ms);
  }
}
export function duration(ms) {
  if (ms === null || ms === undefined) return "—";
  ms = Number(ms);
  if (ms < 1000) return ms + " ms";
  const s = ms / 1000;
  if (s < 120) return s.toFixed(1) + " s";
  if (s < 7200) return (s / 60).toFixed(1) + " min";
  if (s < 172800) return (s / 3600).toFixed(1) + " h";
  return (s / 86400).toFixed(1) + " days";
}
export const num = (v) => (v === null || v === undefined ? "—" : Number(v).toLocaleString("en-US", { maximumFractionDigits: 2 }));

// datetime-local value (viewer's zone) <-> Unix ms
export function inputToMs(v) {
  if (!v) return "";
  const d = new Date(v);
  return isNaN(d) ? "" : String(d.getTime());
}
export function msToInput(ms) {
  if (!ms) return "";
  const d = new Date(Number(ms));
  if (isNaN(d)) return "";
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

// An action the viewer confirms first; its outcome shown beside the button.
export function Action({ label, question, run, done, danger, disabled }) {
  const [busy, setBusy] = useState(false);
  const [msg, setMsg] = useState(null);
  const click = async () => {
    if (!window.confirm(question)) return;
    setBusy(true);
    setMsg(null);
    try {
      const r = await run();
      setMsg({ ok: true, text: done ? done(r) : label + ": done" });
    } catch (e) {
      setMsg({ ok: false, text: label + ": " + (e.status ? e.status + " " : "") + e.message });
    }
    setBusy(false);
  };
  return html`<span class="action">
    <button type="button" class=${danger ? "danger" : ""} disabled=${busy || disabled} onClick=${click}>${label}</button>
    ${msg && html`<span role="status" class=${msg.ok ? "ok" : "error"}>${msg.text}</span>`}
  </span>`;
}

export function StatusBadge({ status }) {
  return html`<span class=${"badge s-" + String(status).replace(/[^a-z_]/g, "")}>${status}</span>`;
}

export function Json({ value }) {
  return html`<pre class="json">${typeof value === "string" ? value : JSON.stringify(value, null, 2)}</pre>`;
}

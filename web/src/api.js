// The API as the console calls it: JSON over fetch, with the token the viewer
// gave (kept in sessionStorage only: gone when the tab closes, never a cookie).
const KEY = "tickd.token";

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

const listeners = new Set();
// told of every 401, so that the shell asks for a token
export function onUnauthorized(fn) {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

export const token = {
  get: () => sessionStorage.getItem(KEY) || "",
  set: (t) => (t ? sessionStorage.setItem(KEY, t) : sessionStorage.removeItem(KEY)),
};

export async function call(method, path, body) {
  const headers = { Accept: "application/json" };
  const t = token.get();
  if (t) headers.Authorization = "Bearer " + t;
  const init = { method, headers, credentials: "omit", cache: "no-store" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const res = await fetch(path, init);
  if (res.status === 204) return null;
  const text = await res.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!res.ok) {
    if (res.status === 401) listeners.forEach((fn) => fn());
    const e = (data && data.error) || {};
    throw new ApiError(res.status, e.code || "http_" + res.status, e.message || res.statusText || "request failed");
  }
  if (data === null && path.startsWith("/v1/")) throw new ApiError(res.status, "bad_json", "answer is not JSON");
  return data ?? text;
}

export const get = (path) => call("GET", path);
export const post = (path, body) => call("POST", path, body);
export const put = (path, body) => call("PUT", path, body);
export const del = (path) => call("DELETE", path);

export async function metrics() {
  const res = await fetch("/metrics", { credentials: "omit", cache: "no-store" });
  if (!res.ok) throw new ApiError(res.status, "metrics", "GET /metrics: " + res.status);
  return parseMetrics(await res.text());
}

// Prometheus text -> {name: [{labels, value}]}
export function parseMetrics(text) {
  const out = {};
  for (const line of text.split("\n")) {
    if (!line || line[0] === "#") continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = {};
    if (m[3]) for (const p of m[3].matchAll(/([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"/g)) labels[p[1]] = p[2];
    (out[m[1]] ||= []).push({ labels, value: Number(m[4]) });
  }
  return out;
}

// ids and names in a path: tickd takes ":" as is (keys may hold it), not as %3A
export const enc = (s) => encodeURIComponent(s).replace(/%3A/gi, ":");

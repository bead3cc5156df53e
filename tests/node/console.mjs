// Drives Debian's chromium (playwright-core, headless) through tickd's web
// console for tests/integration/test_console.py, against the real tickd,
// Redis and receivers that the test started.
//
//   node console.mjs SCENARIO '{"base": "http://127.0.0.1:PORT", ...}'
//
// Prints one JSON line of findings on success; any failed check, console
// error, page error, or answer of the console's without its security headers
// throws (exit 1). Each wait is for what is asserted, with a deadline.
import { chromium } from "playwright-core";
import { readFileSync, mkdirSync } from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const AXE = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");
const [scenario, argText] = process.argv.slice(2);
const arg = JSON.parse(argText || "{}");
const base = arg.base;
const out = {};
const T = 20000; // a deadline, not a pause: every wait ends as soon as its condition holds
let expect403 = false; // the read-only scenario's own refused call

function check(cond, what) {
  if (!cond) throw new Error("check failed: " + what);
}

async function open() {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, timezoneId: arg.viewer_tz || "Europe/Paris" });
  const page = await context.newPage();
  const problems = [];
  page.on("console", (m) => {
    // the console asks for a token when the API answers 401: that answer is
    // expected, not an error of the console
    if (m.type() === "error" && !/status of 401/.test(m.text()) && !(expect403 && /status of 403/.test(m.text()))) problems.push("console error: " + m.text());
  });
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
  page.on("dialog", (d) => d.accept());
  const seen = { ui: 0, foreign: [] };
  page.on("response", async (r) => {
    const u = new URL(r.url());
    if (u.origin !== new URL(base).origin) return;
    if (!u.pathname.startsWith("/ui")) return;
    seen.ui++;
    const h = await r.allHeaders();
    const csp = h["content-security-policy"] || "";
    for (const need of ["default-src 'self'", "frame-ancestors 'none'"])
      if (!csp.includes(need)) problems.push(`${u.pathname}: CSP lacks ${need}: ${csp}`);
    if (/unsafe-(eval|inline)/.test(csp)) problems.push(`${u.pathname}: CSP allows unsafe: ${csp}`);
    if (h["x-content-type-options"] !== "nosniff") problems.push(`${u.pathname}: no nosniff`);
    if (h["referrer-policy"] !== "no-referrer") problems.push(`${u.pathname}: no Referrer-Policy`);
    if (u.pathname.startsWith("/ui/assets/") && r.status() === 200 &&
        h["cache-control"] !== "public, max-age=31536000, immutable") problems.push(`${u.pathname}: cache ${h["cache-control"]}`);
  });
  page.on("request", (r) => {
    const u = new URL(r.url());
    if (u.origin !== new URL(base).origin) seen.foreign.push(r.url());
  });
  return { browser, page, problems, seen };
}

async function login(page, tok) {
  if (!tok) return;
  const input = page.locator("#token-input");
  await input.waitFor({ timeout: T });
  await input.fill(tok);
  await page.getByRole("button", { name: "Use this token" }).click();
  await page.getByText("Use this token").waitFor({ state: "detached", timeout: T });
}

async function axe(page, view) {
  // evaluated, not added as a script: the console's CSP refuses inline ones
  if (!(await page.evaluate(() => !!window.axe))) await page.evaluate(AXE);
  const res = await page.evaluate(async () => {
    const r = await window.axe.run(document, { resultTypes: ["violations"] });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.length, help: v.help, target: v.nodes[0] && v.nodes[0].target }));
  });
  const bad = res.filter((v) => v.impact === "serious" || v.impact === "critical");
  check(!bad.length, `${view}: accessibility violations ${JSON.stringify(bad)}`);
  return res.length;
}

async function shot(page, name) {
  if (!arg.shots) return;
  mkdirSync(arg.shots, { recursive: true });
  await page.screenshot({ path: `${arg.shots}/${name}.png`, fullPage: true });
}

async function settle(page) {
  await page.waitForFunction(() => !document.querySelector('[aria-busy="true"]'), null, { timeout: T });
}

const scenarios = {
  // every view: loads, no console error, axe, screenshot; the overview is live
  async views({ page }) {
    const views = [
      ["overview", "/ui/", "Overview"],
      ["tasks", "/ui/tasks?status=failed", "Tasks"],
      ["task", "/ui/tasks/" + encodeURIComponent(arg.task_id), "Task"],
      ["dead-letters", "/ui/dead-letters", "Dead letters"],
      ["schedules", "/ui/schedules", "Schedules"],
      ["schedule", "/ui/schedules/" + encodeURIComponent(arg.schedule_id), "Schedule"],
      ["schedule-new", "/ui/schedules/new", "New schedule"],
      ["queues", "/ui/queues", "Queues"],
      ["cluster", "/ui/cluster", "Cluster"],
    ];
    out.axe = {};
    let first = true;
    for (const [name, path, h1] of views) {
      await page.goto(base + path);
      if (first) await login(page, arg.token);
      first = false;
      await page.getByRole("heading", { level: 1, name: h1 }).first().waitFor({ timeout: T });
      await settle(page);
      if (name === "overview") {
        const tiles = page.locator(".tiles");
        await page.waitForFunction(() => document.querySelector(".tiles").dataset.live, null, { timeout: T });
        const a = await tiles.getAttribute("data-live");
        await page.waitForFunction((a0) => document.querySelector(".tiles").dataset.live !== a0, a, { timeout: 10000 });
        await page.waitForFunction(() => document.querySelectorAll(".u-wrap, .chart canvas").length > 0 || document.body.innerText.includes("History is not available"), null, { timeout: T });
      }
      if (name === "task") await page.getByRole("heading", { name: "Attempts" }).waitFor({ timeout: T });
      if (name === "schedule-new") await page.getByRole("table", { name: "Previewed runs" }).waitFor({ timeout: T });
      out.axe[name] = await axe(page, name);
      await shot(page, name);
    }
    // a view by its pasted URL, and an unknown asset is not the app
    const r = await page.request.get(base + "/ui/assets/nothing.0000000000.js");
    check(r.status() === 404, "unknown asset 404");
  },

  // a failed task found by filter and by id, retried from the console
  async retry({ page }) {
    await page.goto(`${base}/ui/tasks?status=failed&key_prefix=${encodeURIComponent(arg.key_prefix)}`);
    await login(page, arg.token);
    const row = page.locator(`tr[data-id="${arg.task_id}"]`);
    await row.waitFor({ timeout: T });
    check((await page.locator("tbody tr[data-id]").count()) === 1, "one task matches the key prefix");
    await page.goto(`${base}/ui/tasks`);
    await page.getByLabel("task id").fill(arg.task_id);
    await page.getByRole("button", { name: "Open" }).click();
    await page.waitForURL(`**/ui/tasks/${encodeURIComponent(arg.task_id)}`, { timeout: T });
    await page.locator(".badge", { hasText: "failed" }).first().waitFor({ timeout: T });
    await page.locator("table.attempts tbody tr").first().waitFor({ timeout: T });
    await page.getByRole("button", { name: "Retry" }).click();
    await page.locator("dl.facts .badge", { hasText: "succeeded" }).waitFor({ timeout: 15000 });
    await shot(page, "task-retried");
    // the dead letters: retry every task matching a filter, with its count
    await page.goto(`${base}/ui/dead-letters?status=failed&key_prefix=${encodeURIComponent(arg.bulk_prefix)}`);
    await page.locator("[data-retention]").waitFor({ timeout: T });
    out.retention = await page.locator("[data-retention]").getAttribute("data-retention");
    await page.locator("tbody tr[data-id]").first().waitFor({ timeout: T });
    await page.getByRole("button", { name: "Retry all matching" }).click();
    await page.getByText(/retried \d+$/).first().waitFor({ timeout: T });
    out.bulk = Number((await page.locator(".action span[role=status]").first().textContent()).match(/\d+/)[0]);
  },

  // a schedule made through the form; its previewed runs
  async schedule({ page }) {
    await page.goto(`${base}/ui/schedules/new`);
    await login(page, arg.token);
    await page.getByLabel("key", { exact: true }).fill(arg.key);
    await page.getByLabel("cron expression").fill(arg.cron);
    await page.getByLabel("time zone").fill(arg.tz);
    await page.getByLabel("callback URL").fill(arg.url);
    const table = page.getByRole("table", { name: "Previewed runs" });
    await page.waitForFunction((tz) => {
      const t = document.querySelector("table.runs");
      return t && t.querySelector("th").textContent.includes(tz) && t.querySelectorAll("tbody tr").length > 0;
    }, arg.tz, { timeout: T });
    out.preview = await table.locator("tbody tr").evaluateAll((rows) => rows.map((r) => Number(r.dataset.at)));
    out.preview_times = await table.locator("tbody tr td:first-child").allTextContents();
    await page.getByRole("button", { name: "Create schedule" }).click();
    await page.waitForURL("**/ui/schedules/sch." + arg.key, { timeout: T });
    await page.getByRole("heading", { name: "Next runs" }).waitFor({ timeout: T });
    out.shown = await page.locator("table.runs tbody tr").evaluateAll((rows) => rows.map((r) => Number(r.dataset.at)));
  },

  // a queue paused from the console holds its tasks; resumed, they go
  async queue({ page }) {
    await page.goto(`${base}/ui/queues`);
    await login(page, arg.token);
    const row = page.locator(`tr[data-queue="${arg.queue}"]`);
    await row.waitFor({ timeout: T });
    await row.getByRole("button", { name: "Pause" }).click();
    await row.locator(".state", { hasText: "paused" }).waitFor({ timeout: T });
    out.paused_at = Date.now();
    // tasks of the paused queue, due now
    const auth = arg.token ? { Authorization: "Bearer " + arg.token } : {};
    out.ids = [];
    for (let i = 0; i < arg.n; i++) {
      const r = await fetch(base + "/v1/tasks", { method: "POST", headers: { "Content-Type": "application/json", ...auth },
        body: JSON.stringify({ callback_url: arg.url, queue: arg.queue, key: `q-${i}` }) });
      check(r.status === 201, "task stored");
      out.ids.push((await r.json()).id);
    }
    await page.waitForFunction(([q, n]) => {
      const c = document.querySelector(`tr[data-queue="${q}"] .waiting`);
      return c && Number(c.textContent) >= n;
    }, [arg.queue, arg.n], { timeout: 15000 });
    out.waited = Number(await row.locator(".waiting").textContent());
    await shot(page, "queue-paused");
    out.resumed_at = Date.now();
    await row.getByRole("button", { name: "Resume" }).click();
    await row.locator(".state", { hasText: "running" }).waitFor({ timeout: T });
  },

  // a read-only token sees no action, and the API refuses one
  async readonly({ page }) {
    const pages = ["/ui/tasks/" + encodeURIComponent(arg.task_id), "/ui/dead-letters", "/ui/queues",
      "/ui/schedules", "/ui/schedules/" + encodeURIComponent(arg.schedule_id)];
    let first = true;
    for (const p of pages) {
      await page.goto(base + p);
      if (first) await login(page, arg.token);
      first = false;
      await page.locator('.scope[data-scope="read"]').waitFor({ timeout: T });
      await page.locator("main h1").first().waitFor({ timeout: T });
      await settle(page);
      await page.locator("table, .facts").first().waitFor({ timeout: T });
      const names = (await page.locator("main button, main a.button").allTextContents())
        .filter((n) => /^(Retry|Retry all matching|Run now|Cancel|Pause|Resume|Delete|Save|New schedule|Create schedule)$/.test(n.trim()));
      check(!names.length, `${p}: read-only sees actions ${JSON.stringify(names)}`);
    }
    expect403 = true;
    out.status = await page.evaluate(async (id) => {
      const r = await fetch("/v1/tasks/" + encodeURIComponent(id) + "/retry", {
        method: "POST", headers: { Authorization: "Bearer " + sessionStorage.getItem("tickd.token") } });
      return [r.status, await r.text()];
    }, arg.task_id);
  },

  // attacker-controlled text shows as text and runs nothing
  async hostile({ page }) {
    await page.goto(`${base}/ui/tasks/${encodeURIComponent(arg.task_id)}`);
    await login(page, arg.token);
    await page.locator("table.attempts tbody tr").first().waitFor({ timeout: T });
    const text = await page.locator("main").innerText();
    for (const s of arg.expect_text) check(text.includes(s), "shown as text: " + s);
    check(!text.includes(arg.secret), "a secret header value reached the page");
    const html = await page.content();
    check(!html.includes(arg.secret), "a secret header value is in the DOM");
    await shot(page, "hostile-task");
    out.imgs = await page.locator("main img, main script, main iframe").count();
    check(out.imgs === 0, "no element made from data");
    await page.goto(`${base}/ui/tasks?status=failed&key_prefix=${encodeURIComponent(arg.key_prefix)}`);
    await page.locator(`tr[data-id="${arg.task_id}"]`).waitFor({ timeout: T });
    const hrefs = await page.locator("main a").evaluateAll((as) => as.map((a) => a.getAttribute("href")));
    check(hrefs.every((h) => h.startsWith("/ui/")), "every link stays in the console: " + hrefs);
    await shot(page, "hostile-list");
    out.pwned = await page.evaluate(() => window.__pwned || null);
    check(out.pwned === null, "a payload ran");
  },
};

const { browser, page, problems, seen } = await open();
try {
  await scenarios[scenario]({ page });
  check(seen.ui > 0, "the console answered");
  check(!seen.foreign.length, "requests left tickd: " + seen.foreign.join(" "));
  check(!problems.length, problems.join("\n"));
  console.log(JSON.stringify(out));
} catch (e) {
  if (arg.shots) mkdirSync(arg.shots, { recursive: true });
  await page.screenshot({ path: (arg.shots || "/tmp") + `/FAILED-${scenario}.png`, fullPage: true }).catch(() => {});
  console.error(String(e.stack || e));
  if (problems.length) console.error(problems.join("\n"));
  process.exitCode = 1;
} finally {
  await browser.close();
}

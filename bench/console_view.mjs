// bench/console_view.mjs: how long the web console takes to its first
// useful view, in Debian's chromium (playwright-core from tests/node): the
// overview's tiles filled from the API, and the task listing's first row.
// Each view is opened ROUNDS times in a fresh page (the first with an empty
// cache); the time is from the navigation's start to the content.
//
//   node bench/console_view.mjs http://127.0.0.1:PORT [ROUNDS]
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import path from "node:path";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "../tests/node/package.json"));
const { chromium } = require("playwright-core");
const [base, roundsArg] = process.argv.slice(2);
const rounds = Number(roundsArg || 5);

const views = [
  // the overview: its tiles hold figures read from the API
  ["overview", "/ui/", (p) => p.waitForFunction(() => document.querySelector(".tiles")?.dataset.live, null, { timeout: 30000 })],
  // the listing: its first task row
  ["tasks", "/ui/tasks", (p) => p.locator("tbody tr[data-id]").first().waitFor({ timeout: 30000 })],
];

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
const out = {};
for (const [name, url, ready] of views) {
  out[name] = [];
  for (let i = 0; i < rounds; i++) {
    const page = await context.newPage();
    const t0 = Date.now();
    await page.goto(base + url, { waitUntil: "commit" });
    await ready(page);
    out[name].push(Date.now() - t0);
    await page.close();
  }
}
await browser.close();
console.log(JSON.stringify(out));

// cron_oracle.mjs -- next runs of cron expressions as the croner package
// computes them, for tests/integration/test_cron_oracle.py to compare with
// tickd's. One JSON query per stdin line:
//   {"expr": "...", "tz": "Europe/London", "after_ms": 0, "n": 5, "domAndDow": true}
// answered by one JSON line: {"runs": [ms, ...]} (fewer than n: no more runs)
// or {"err": "..."}. domAndDow absent leaves croner's default.
import { Cron } from 'croner';
import { createInterface } from 'node:readline';

const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of rl) {
  if (!line.trim()) continue;
  const q = JSON.parse(line);
  let out;
  try {
    const opts = { timezone: q.tz, paused: true };
    if (q.domAndDow !== undefined) opts.domAndDow = q.domAndDow;
    const c = new Cron(q.expr, opts);
    out = { runs: c.nextRuns(q.n, new Date(q.after_ms)).map((d) => d.getTime()) };
  } catch (e) {
    out = { err: String(e.message || e) };
  }
  process.stdout.write(JSON.stringify(out) + '\n');
}

// cron_oracle.mjs -- next runs of cron expressions as the croner package
// computes them, for tests/integration/test_cron_oracle.py to compare with
// tickd's. One JSON query per stdin line:
//   {"expr": "...", "tz": "Europe/London", "after_ms": 0, "n": 5, "domAndDow": true}
// answered by one JSON line: {"runs": [ms, ...]} (fewer than n: no more runs)
// or {"err": "..."}. domAndDow absent leaves croner's default.
import { Cron } from 'croner';
import { createInterface } from 'node:readline';

// croner makes a new Intl.DateTimeFormat for every conversion it does in a
// zone (its toTZ), and making one costs far more than using it: formatters
// of the same locale and options are kept and handed out again. A
// formatter holds no state between calls, so croner's answers are the same.
const Formatter = Intl.DateTimeFormat;
const formatters = new Map();
function KeptFormatter(locale, options) {
  const k = JSON.stringify([locale, options]);
  let f = formatters.get(k);
  if (!f) formatters.set(k, (f = new Formatter(locale, options)));
  return f;
}
KeptFormatter.prototype = Formatter.prototype;
KeptFormatter.supportedLocalesOf = Formatter.supportedLocalesOf.bind(Formatter);
Intl.DateTimeFormat = KeptFormatter;

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

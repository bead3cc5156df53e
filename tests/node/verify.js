// Verify callbacks with the official Standard Webhooks library.
// stdin: JSON {"secrets": ["whsec_..."], "calls": [{"headers": {...}, "body_b64": "..."}]}
// stdout: JSON array, one entry per call and secret: {"ok": true} or {"ok": false, "error": "..."}
"use strict";
const { Webhook } = require("standardwebhooks");

let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (d) => (input += d));
process.stdin.on("end", () => {
  const req = JSON.parse(input);
  const out = req.calls.map((c) =>
    req.secrets.map((s) => {
      try {
        // the body is checked as bytes-as-text; it need not be JSON
        new Webhook(s).verify(Buffer.from(c.body_b64, "base64").toString("utf8"), c.headers,
                              { jsonParse: false });
        return { ok: true };
      } catch (e) {
        return { ok: false, error: String(e && e.message ? e.message : e) };
      }
    })
  );
  process.stdout.write(JSON.stringify(out));
});

-- wrk script: one POST /v1/tasks per request, keep-alive. The task is due in
-- 1 h (nothing fires during the bench) and has no key, so every request
-- makes a new task. BENCH_CB_URL: the receiver's callback URL.
local cb = os.getenv("BENCH_CB_URL") or "http://127.0.0.1:9/cb"
wrk.method = "POST"
wrk.path = "/v1/tasks"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"callback_url":"' .. cb .. '","method":"POST","delay_ms":3600000}'


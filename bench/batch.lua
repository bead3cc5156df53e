-- wrk script: POST /v1/tasks/batch with BENCH_BATCH (default 1000) tasks per
-- request, each due in 1 h, without keys (every task is new). Tasks/s =
-- requests/s x BENCH_BATCH. BENCH_CB_URL: the receiver's callback URL.
local cb = os.getenv("BENCH_CB_URL") or "http://127.0.0.1:9/cb"
local n = tonumber(os.getenv("BENCH_BATCH") or "1000")
local one = '{"callback_url":"' .. cb .. '","method":"POST","delay_ms":3600000}'
local t = {}
for i = 1, n do t[i] = one end
wrk.method = "POST"
wrk.path = "/v1/tasks/batch"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"tasks":[' .. table.concat(t, ",") .. ']}'

-- wrk script: one METHOD /v1/tasks/{id} per request, keep-alive, over the
-- ids of the file BENCH_IDS (one a line). Thread k of BENCH_THREADS (wrk's
-- -t) takes its own share of the ids (lines k, k + n, ...), in turn from a
-- random place. BENCH_METHOD: GET (default) or DELETE. A DELETE run must end
-- before a thread has gone round its share: the second DELETE of an id is a
-- 404, which wrk counts as a non-2xx answer.
local method = os.getenv("BENCH_METHOD") or "GET"
local nthreads = tonumber(os.getenv("BENCH_THREADS") or "1")
local started = 0

function setup(thread)
  thread:set("k", started)
  started = started + 1
end

local ids, i = {}, 1

function init(args)
  local f = assert(io.open(os.getenv("BENCH_IDS"), "r"))
  local line = 0
  for id in f:lines() do
    if line % nthreads == k then ids[#ids + 1] = id end
    line = line + 1
  end
  f:close()
  assert(#ids > 0, "no ids for thread " .. k)
  math.randomseed(os.time() * 16 + k)
  i = math.random(#ids)
end

function request()
  local id = ids[i]
  i = i % #ids + 1
  return wrk.format(method, "/v1/tasks/" .. id)
end

-- settle: record the outcomes of attempts of tasks homed in this slice.
-- KEYS: due, task, del, run (home slice)
-- ARGV: retention_ms, then per task a group of 8: id, outcome
--       (ok|fail|retry|release), attempt, status_code, error, next_due_ms,
--       local (1 when the lease is in this slice), next_slice (retry: the
--       slice holding the retry pointer, '' = here)
-- Returns each task's status after the call, in order.
local retention = tonumber(ARGV[1])
local now = now_ms()
local out = {}

local function settle(id, o, attempt, code, err, next_due, loc, next_slice)
  local st = state_get(KEYS[2], id)
  if loc == '1' then redis.call('ZREM', KEYS[4], id) end
  if not st then return 'missing' end
  -- not running: a duplicate delivery after a crash settled it already
  if st.s ~= 'running' then return st.s end
  if o == 'release' then
    st.s = 'scheduled'
    if loc == '1' then redis.call('ZADD', KEYS[1], st.due, id) end
  else
    st.a = tonumber(attempt)
    if code ~= '' then st.code = tonumber(code) end
    if err ~= '' then st.err = err end
    if o == 'retry' then
      st.s = 'scheduled'
      st.due = tonumber(next_due)
      if next_slice == '' then
        st.cur = nil
        redis.call('ZADD', KEYS[1], next_due, id)
      else
        st.cur = next_slice
      end
    else
      st.s = (o == 'ok') and 'succeeded' or 'failed'
      st.fin = now
      st.cur = nil
      close_task(KEYS[2], KEYS[3], now, retention)
    end
  end
  state_put(KEYS[2], id, st)
  return st.s
end

for i = 2, #ARGV, 8 do
  out[#out + 1] = settle(ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4],
                         ARGV[i + 5], ARGV[i + 6], ARGV[i + 7])
end
return out

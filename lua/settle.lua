-- settle: record the outcome of an attempt in the task's home slice.
-- KEYS: due, task, del, run (home slice)
-- ARGV: id, outcome (ok|fail|retry|release), attempt, status_code, error,
--       next_due_ms, local (1 when the lease is in this slice), retention_ms,
--       next_slice (retry: the slice holding the retry pointer, '' = here)
-- Returns the task's status after the call.
local id = ARGV[1]
local st = state_get(KEYS[2], id)
if ARGV[7] == '1' then redis.call('ZREM', KEYS[4], id) end
if not st then return 'missing' end
-- not running: a duplicate delivery after a crash settled it already
if st.s ~= 'running' then return st.s end
local o = ARGV[2]
if o == 'release' then
  st.s = 'scheduled'
  if ARGV[7] == '1' then redis.call('ZADD', KEYS[1], st.due, id) end
else
  local now = now_ms()
  st.a = tonumber(ARGV[3])
  if ARGV[4] ~= '' then st.code = tonumber(ARGV[4]) end
  if ARGV[5] ~= '' then st.err = ARGV[5] end
  if o == 'retry' then
    st.s = 'scheduled'
    st.due = tonumber(ARGV[6])
    if ARGV[9] == '' then
      st.cur = nil
      redis.call('ZADD', KEYS[1], ARGV[6], id)
    else
      st.cur = ARGV[9]
    end
  else
    st.s = (o == 'ok') and 'succeeded' or 'failed'
    st.fin = now
    st.cur = nil
    close_task(KEYS[2], KEYS[3], now, tonumber(ARGV[8]))
  end
end
state_put(KEYS[2], id, st)
return st.s

-- fetch: a retry pointer was claimed in a later slice; mark the task running
-- in its home slice and return what to call.
-- KEYS: task. ARGV: id
-- Returns {'ok', attempt, spec}, or {status} when it must not run (cancelled,
-- final, or gone).
local st = state_get(KEYS[1], ARGV[1])
if not st then return {'missing'} end
if st.s ~= 'scheduled' and st.s ~= 'running' then return {st.s} end
st.s = 'running'
state_put(KEYS[1], ARGV[1], st)
return {'ok', st.a + 1, redis.call('HGET', KEYS[1], ARGV[1])}

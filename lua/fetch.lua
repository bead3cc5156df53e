-- fetch: a pointer was claimed in a slice other than the task's home (a
-- retry, or a move: retry of a final task, run now); mark the task running in
-- its home slice and return what to call.
-- KEYS: due, task, del, ok, failed, cancelled, expired (home). ARGV: id, slice of the
-- pointer, retention_ms, failed_retention_ms
-- Returns {'ok', attempt, spec, queue} (queue: the count a retry committed
-- here joins again, else ''), or {status} when it must not run (cancelled,
-- final, gone, or moved: the task's entry is no longer that slice's).
local id, slice = ARGV[1], ARGV[2]
local st = task_state(KEYS[1], KEYS[2], id)
if not st then return {'missing'} end
-- a move whose pointer is claimed before the move was committed: commit it
local reopened = ''
if st.mv and st.mv.slice == slice then st, reopened = move_commit(KEYS, id, st) end
if st.s ~= 'scheduled' and st.s ~= 'running' then return {st.s} end
if st.cur ~= slice then return {'moved'} end
st.s = 'running'
st.w = nil
state_put(KEYS[2], id, st)
return {'ok', st.a + 1, redis.call('HGET', KEYS[2], id), reopened}

-- move: make a task run again (retry: a failed or cancelled task, its
-- attempts reset and its last error kept) or run now (run: a scheduled task),
-- at `due` from `slice`. When slice is not the home, the move is three steps:
-- prepare here (mv), the pointer there (ptr.lua add), commit here; a pointer
-- claimed before the commit commits it (fetch.lua), so no step order loses
-- or doubles the run.
-- KEYS: due, task, del, ok, failed, cancelled, expired (home). ARGV: op (prepare |
-- commit), id, kind (retry | run), slice, due_ms
-- Returns {'ok', state, queue} | {'notfound'} | {'conflict', status}: queue
-- names the count the task joins again when this call reopened it (a
-- retry committed), else ''.
local op, id, kind, slice, due = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
local st = task_state(KEYS[1], KEYS[2], id)
if not st then return {'notfound'} end
if op == 'prepare' then
  -- an expired task is never called after its expiry: not retried
  local ok = (kind == 'retry' and (st.s == 'failed' or st.s == 'cancelled')) or
             (kind == 'run' and st.s == 'scheduled')
  if not ok then return {'conflict', st.s} end
  -- never called after its expiry: not retried at or past it
  local exp = kind == 'retry' and task_expires(KEYS[2], id)
  if exp and due >= exp then return {'conflict', 'past_expiry'} end
  st.mv = {slice = slice, due = due, kind = kind}
  state_put(KEYS[2], id, st)
  -- in the home slice itself: nothing to wait for
  local reopened = ''
  if slice == '' then st, reopened = move_commit(KEYS, id, st) end
  return {'ok', cjson.encode(st), reopened}
end
if not st.mv or st.mv.slice ~= slice then
  -- committed already (by fetch), or another move since
  if st.s == 'scheduled' or st.s == 'running' then return {'ok', cjson.encode(st), ''} end
  return {'conflict', st.s}
end
local reopened
st, reopened = move_commit(KEYS, id, st)
return {'ok', cjson.encode(st), reopened}

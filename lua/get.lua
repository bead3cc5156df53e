-- get: a task's record (or schema 1 spec) and state, where it is: in :task,
-- or as a fresh member of :due (lib.lua). Writes nothing.
-- KEYS: due, task (home). ARGV: id
-- Returns {record, state JSON}, or {} when there is no such task.
local id = ARGV[1]
local r = redis.call('HMGET', KEYS[2], id, 's:' .. id)
if r[1] and r[2] then return r end
if r[2] then return {} end
local m, rec, at = fresh_find(KEYS[1], id)
if not m then return {} end
return {rec, cjson.encode(fresh_state(rec, at))}

-- add: store a task in its home slice. Idempotent on the id.
-- KEYS: due, task, del. ARGV: id, spec, due_ms, timeout_ms, slice_end_ms, grace_ms
-- Returns {1, state} when stored, {0, state} when the id existed already.
-- Refuses (error STALE) a slice the scan may already have passed.
local now = now_ms()
if tonumber(ARGV[5]) + tonumber(ARGV[6]) <= now then
  return redis.error_reply('STALE slice already passed by the scan')
end
local old = redis.call('HGET', KEYS[2], 's:' .. ARGV[1])
if old then return {0, old} end
local st = cjson.encode({s = 'scheduled', a = 0, due = tonumber(ARGV[3]), to = tonumber(ARGV[4])})
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2], 's:' .. ARGV[1], st)
redis.call('HINCRBY', KEYS[2], '#open', 1)
redis.call('PERSIST', KEYS[2])
redis.call('PERSIST', KEYS[3])
redis.call('SREM', KEYS[3], ARGV[1])
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
return {1, st}

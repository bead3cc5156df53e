-- ptr: a retry's entry in a slice other than its home.
-- KEYS: due, run, ptr. ARGV: id, op, due_ms, timeout_ms
--   add:     the retry is due at due_ms here (also ends a lease held here)
--   done:    the attempt leased here is settled; forget the pointer
--   requeue: give an unstarted lease back, due again at due_ms
-- The lease ends last: a write refused midway leaves it, never the task
-- without one.
local id, op = ARGV[1], ARGV[2]
if op == 'add' then
  redis.call('HSET', KEYS[3], id, ARGV[4])
  redis.call('ZADD', KEYS[1], ARGV[3], id)
elseif op == 'requeue' then
  redis.call('ZADD', KEYS[1], ARGV[3], id)
else
  redis.call('HDEL', KEYS[3], id)
end
redis.call('ZREM', KEYS[2], id)
return 1

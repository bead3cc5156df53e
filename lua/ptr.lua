-- ptr: a retry's entry in a slice other than its home.
-- KEYS: due, run, ptr. ARGV: id, op, due_ms, timeout_ms
--   add:     the retry is due at due_ms here (also ends a lease held here)
--   done:    the attempt leased here is settled; forget the pointer
--   requeue: give an unstarted lease back, due again at due_ms
--   take:    a task waiting here for a limit may go: due at due_ms, if its
--            entry is still here (returns 1, else 0)
-- The lease ends last: a write refused midway leaves it, never the task
-- without one.
local id, op = ARGV[1], ARGV[2]
if op == 'take' then
  if not redis.call('ZSCORE', KEYS[1], id) then return 0 end
  redis.call('ZADD', KEYS[1], ARGV[3], id)
  return 1
end
if op == 'add' then
  redis.call('HSET', KEYS[3], id, ARGV[4])
  redis.call('ZADD', KEYS[1], ARGV[3], id)
elseif op == 'requeue' then
  redis.call('ZADD', KEYS[1], ARGV[3], id)
else
  redis.call('HDEL', KEYS[3], id)
end
if redis.call('ZREM', KEYS[2], id) == 1 then run_unpin(KEYS[2]) end
return 1

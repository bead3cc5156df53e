-- bench/floor/claim.lua: the least a claim of this keyspace can do, to
-- measure against lua/claim.lua (bench/scripts_cg.sh bench/floor; not a
-- script tickd runs). Takes the fresh members due (ZRANGEBYSCORE), keeps
-- each task's record in the slice's hash (the record must outlive its :due
-- member, for a retry and for GET), takes the members out of :due, and
-- writes one lease for the whole call, its ids in one member.
-- Left out, each a guarantee or a feature lua/claim.lua keeps: a lease a
-- task (its own deadline; a crash frees each task at its own timeout), the
-- running state written (GET and the listing read it; the settle checks it),
-- expired leases taken again, cancellations (:del), retry pointers (:ptr),
-- tasks held back by a limit, tasks due later within the reach, the counts
-- the scheduler reads.
-- KEYS: due, task, del, run, ptr (as lua/claim.lua). ARGV[1]: reach_ms (how
-- far ahead of now), ARGV[2]: limit; the rest of lua/claim.lua's ARGV is not
-- read. Its reply has lua/claim.lua's form, so that tickd can run it
-- (make bench's burst at the floor: bench/README.md).
local now = now_ms()
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. int_text(now + tonumber(ARGV[1])),
                       'LIMIT', 0, tonumber(ARGV[2]))
if #due == 0 then return {0, 0, 0} end
-- (the pin keeps the hash out of Redis's packed encoding, as lua/claim.lua's)
local hset, ids, n = {TASK_PIN_FIELD, TASK_PIN}, {}, 2
for i = 1, #due do
  local m = due[i]
  local nl = string.find(m, '\n', 1, true)
  local id = string.sub(m, 1, nl - 1)
  ids[i] = id
  n = n + 1; hset[n] = id
  n = n + 1; hset[n] = string.sub(m, nl + 1)
end
bulk_write('HSET', KEYS[2], hset)
redis.call('ZADD', KEYS[4], now + 15000, table.concat(ids, '\n'))
bulk_write('ZREM', KEYS[1], due)
local out = {0, 0, #due}
for i = 1, #due do out[i + 3] = due[i] end
return out

-- bench/floor/settle.lua: the least a settle of first attempts that
-- succeeded can do, to measure against lua/settle.lua (bench/scripts_cg.sh
-- bench/floor; not a script tickd runs). Reads each task's state (one
-- HMGET: a task settled already, by a replica that took it after a crash,
-- is not settled twice), writes each one's succeeded state, of the same
-- bytes lua/settle.lua writes (its due from the id; its timeout and queue
-- would come from tickd's arguments, here the burst's own), one member of
-- the succeeded index for the call, and drops one lease (the call's).
-- Left out: a running state read and checked (floor/claim.lua writes none),
-- a lease a task, every other outcome, the queues' counts, the slice's
-- close.
-- KEYS: as lua/settle.lua. ARGV: retention, failed retention, token, then
-- per task its id and its history entry (lua/settle.lua's success form).
local now = now_ms()
local token = ARGV[3]
local f, ids, hs, n = {}, {}, {}, 0
for g = 4, #ARGV, 2 do
  n = n + 1
  ids[n] = ARGV[g]
  f[n] = 's:' .. ARGV[g]
  hs[n] = ARGV[g + 1]
end
local got = bulk_read('HMGET', KEYS[2], f)
local at_from = #string.match(KEYS[2], '{([^}]*)}') + 2
local head = '{"s":"succeeded","a":1,"due":'
local tail = ',"to":10000,"q":1,"fin":' .. now .. ',"ft":"' .. token .. '","h":['
local hset, ok, k, m = {}, {}, 0, 0
for i = 1, n do
  if not got[i] then
    k = k + 1; hset[k] = f[i]
    k = k + 1; hset[k] = head .. string.sub(ids[i], at_from, at_from + 12) .. tail .. hs[i] .. ']}'
    m = m + 1; ok[m] = ids[i]
  end
end
bulk_write('HSET', KEYS[2], hset)
redis.call('ZADD', KEYS[5], now, table.concat(ok, '\n'))
redis.call('ZREMRANGEBYRANK', KEYS[4], 0, 0)
return {'default', m}

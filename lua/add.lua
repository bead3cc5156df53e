-- add: store tasks in their home slice (this call's slice). Idempotent on the id.
-- KEYS: due, task, del. ARGV: slice_end_ms, grace_ms, again ('1': this call
-- may have run before, its answer lost: rcluster sent it again), then the
-- tasks, in one of two layouts:
-- - per task a group of 6: id, record (src/model/task.h), due_ms, timeout_ms
--   (due_ms and timeout_ms as integers), queue ('' = the default), form: f =
--   fresh (lib.lua; its key is tickd's, due at its execute_at), k = full, c =
--   full, and its key could be one tickd made (a fresh task of that id is
--   looked for too). The state names the queue (q: its name, 1 for the
--   default; lib.lua state_queue) so that its end is counted off it.
-- - fresh tasks only: 'f' (never an id: ids have dots), then per task a
--   pair, due_ms and the task's :due member as lib.lua has it (its id, '\n',
--   its record): ZADD's own arguments, so that a call sent once is one ZADD
--   of ARGV, with no string made (Redis's Lua hashes every byte of every
--   string a script makes).
-- Returns one element per task, in order: 1 when stored, 2 when stored by this
-- call's first run (it was sent again: a fresh task found is its own, its id
-- being new), or the state already stored under that id (also for an id
-- repeated within the call: the first one is stored; but not among fresh
-- tasks not sent again, which are not looked for: a fresh id is tickd's
-- own, 22 random characters drawn from the kernel, never twice). A stored task's
-- state is what tickd sent: it is not sent back. A call of fresh pairs sent
-- once returns the number of tasks instead: each was stored (1).
-- Refuses (error STALE) a slice the scan may already have passed: nothing is
-- written then. A call sent again is answered all the same when its first run
-- stored every task of it (nothing is left to write).
local G = 6
local now = now_ms()
local maybe_again = ARGV[3] == '1'
local stale = tonumber(ARGV[1]) + tonumber(ARGV[2]) <= now
if stale and not maybe_again then
  return redis.error_reply('STALE slice already passed by the scan')
end
-- Tasks counted open in this slice (a fresh one when its member is new: a
-- call's first run that Redis runs after the same call sent again (its
-- connection dropped while Redis was stalled; the resend, on another, ran
-- first) finds nothing to look for (again = 0) and adds the same member,
-- which is not new then); a hash this add made (or one whose tasks had all
-- ended) gets its pin now (lib.lua: TASK_PIN), before the claim writes the
-- records. A slice that had tasks open has no expiry to take off: its keys
-- get one only when its count falls to 0 (lib.lua close_slice), and
-- whatever opens it again takes it off.
local function opened_now(opened)
  if opened == 0 then return end
  local open = redis.call('HINCRBY', KEYS[2], '#open', opened)
  if open > opened then return end
  if open == opened then redis.call('HSET', KEYS[2], TASK_PIN_FIELD, TASK_PIN) end
  redis.call('PERSIST', KEYS[2])
  redis.call('PERSIST', KEYS[3])
end

-- Fresh pairs sent once: ZADD of ARGV as it came. Sent again, they are made
-- groups of 6 (above) and go the general way.
local A = ARGV
if ARGV[4] == 'f' then
  if not maybe_again then
    opened_now(bulk_write('ZADD', KEYS[1], ARGV, 5))
    return (#ARGV - 4) / 2
  end
  -- (the timeout and queue as tickd would send them: the record's)
  A = {ARGV[1], ARGV[2], ARGV[3]}
  for i = 5, #ARGV, 2 do
    local m = ARGV[i + 1]
    local nl = string.find(m, '\n', 1, true)
    local rec = string.sub(m, nl + 1)
    local to, q = rec_to_queue(rec)
    local n = #A
    A[n + 1] = string.sub(m, 1, nl - 1)
    A[n + 2] = rec
    A[n + 3] = ARGV[i]
    A[n + 4] = to
    A[n + 5] = q or ''
    A[n + 6] = 'f'
  end
end

-- Every task: its state, to find one stored before. A fresh one is named by
-- no other add (its id is new: a key tickd drew), but this very call may come
-- again (a command is sent again when its connection drops before the
-- answer; ARGV[3] then says so): once the task has become full (claimed,
-- cancelled) its state says so; before, its member does. (A call of fresh
-- tasks only sent once, ARGV[4] 'f', has nothing to look for: above.)
local sfields, fresh, looked = {}, {}, maybe_again
for i = 4, #A, G do
  if A[i + 5] == 'f' then fresh[#fresh + 1] = A[i] .. '\n' .. A[i + 1]
  else looked = true end
end
local old = {}
if looked then
  for i = 4, #A, G do sfields[#sfields + 1] = 's:' .. A[i] end
  old = redis.call('HMGET', KEYS[2], unpack(sfields))
end
local again = maybe_again and #fresh > 0 and redis.call('ZMSCORE', KEYS[1], unpack(fresh)) or {}
-- The state a stored task starts in (its group at A[i]); queue names are
-- [A-Za-z0-9._-]: nothing to escape
local function scheduled(i)
  local q = A[i + 4] == '' and '1' or ('"' .. A[i + 4] .. '"')
  return '{"s":"scheduled","a":0,"due":' .. A[i + 2] .. ',"to":' .. A[i + 3] ..
         ',"q":' .. q .. '}'
end
local out, seen, hset, zadd, zfresh, ids, full = {}, {}, {}, {}, {}, {}, {}
local fi = 0
for i = 4, #A, G do
  local id, n, form = A[i], (i - 4) / G + 1, A[i + 5]
  local prev = old[n] or (seen[id] and scheduled(seen[id]))
  local member = id
  local own = false
  if form == 'f' then
    fi = fi + 1
    member = fresh[fi]
    -- found (fresh still, or full since): this call's first run stored it
    own = old[n] or again[fi]
  end
  if form == 'c' and not prev then
    local m, rec, at = fresh_find(KEYS[1], id)
    if m then prev = cjson.encode(fresh_state(rec, at)) end
  end
  if own then
    out[#out + 1] = 2
  elseif prev then
    out[#out + 1] = prev
  else
    seen[id] = i
    if form ~= 'f' then
      hset[#hset + 1] = id
      hset[#hset + 1] = A[i + 1]
      hset[#hset + 1] = sfields[n]
      hset[#hset + 1] = scheduled(i)
      full[#full + 1] = id
    end
    local z = form == 'f' and zfresh or zadd
    z[#z + 1] = A[i + 2]
    z[#z + 1] = member
    ids[#ids + 1] = id
    out[#out + 1] = 1
  end
end
-- (sent again past the slice's end, with a task its first run did not store)
if stale and #ids > 0 then
  return redis.error_reply('STALE slice already passed by the scan')
end
-- Old tombstones of these ids go first (one left behind would make the claim
-- drop the new task; a fresh task's id is new), then the :due entries: if a
-- later write is refused the call answers an error (the client is told
-- nothing was stored), and an entry with no record is dropped by the claim; a
-- record with no entry would never fire.
if #ids > 0 then
  if #full > 0 then redis.call('SREM', KEYS[3], unpack(full)) end
  local opened = #full + bulk_write('ZADD', KEYS[1], zfresh)
  bulk_write('ZADD', KEYS[1], zadd)
  bulk_write('HSET', KEYS[2], hset)
  opened_now(opened)
end
return out

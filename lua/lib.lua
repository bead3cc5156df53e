-- lib.lua: the helpers of every other script in this directory. tickd loads
-- each script after the definitions below that it names, and those they
-- name in turn (src/store/script.h): Redis runs a script's whole text at
-- every call, and two dozen functions made anew each time were most of what
-- a short script cost. A definition is a line at column 0 beginning "local "
-- with the lines up to the next one, and the comment lines right above it:
-- keep each top-level definition so, and before what uses it (tickd refuses
-- to start on a lib.lua of another form, naming the line).
--
-- Key schema v2 (P = the configured prefix, S = one slice = one UTC minute x
-- one bucket, "YYYYMMDDHHMM.b"). Every key of a slice has the hash tag {S}, so
-- each script call touches one cluster slot.
--   P:{S}:due   ZSET  task id -> due time (ms); or a fresh task (below)
--   P:{S}:task  HASH  id -> the task's record (src/model/task.h), or its spec (JSON,
--                     as stored by schema 1)
--                     s:<id> -> state (JSON, below)
--                     #open -> count of tasks of this slice not yet final
--   P:{S}:del   SET   ids cancelled while in :due (lazy delete; claim drops them)
--   P:{S}:run   ZSET  claimed id -> lease deadline (ms); expired = claim again;
--                     and RUN_PIN -> +inf while it holds a lease (below)
--   P:{S}:w     STRING written (expiring in 60 s) before a WAIT, when an add found its
--                     ids stored: the WAIT then covers them (store_redis.c)
--   P:{S}:ptr   HASH  id -> timeout ms, for retries whose record lives in an
--                     earlier slice (the id names that home slice)
--   P:{S}:failed, P:{S}:cancelled, P:{S}:expired
--               ZSET  id of this home slice -> when it ended that way (ms):
--                     the listing's index of final tasks, kept with the state
--   P:{S}:ok    ZSET  the same for the succeeded, a member a settle: the ids
--                     it ended so, '\n' between -> when (ms); a member of one
--                     id is one a build before wrote (list.lua reads both)
--   P:slices    ZSET  slice name, score 0 (its lexical order is time order): every slice that may hold
--                     tasks (written before a slice's first add; the listing
--                     walks it and drops slices that are gone)
--   P:wm:{b}    STRING minute number of bucket b's oldest undrained slice
--   P:meta      HASH  schema, buckets; wm (the watermarks were written)
--   P:marker:{m<n>} STRING a random value written once on each master (n: the first
--                     tag hashing to its slots): gone or changed, that node lost
--                     tickd's data (store_redis.c, the watch)
--   P:{sc.b}:sdef  HASH  schedule id -> definition; s:<id> -> state (src/store/store.h)
--   P:{sc.b}:snext ZSET  active schedule id -> next run (ms), or its lease's end
--   P:{sc.b}:sall  ZSET  every schedule id of bucket b, score 0 (listing by id)
-- State JSON: s = scheduled|running|succeeded|failed|cancelled, q = queue
-- (1: the default), w = why a limit holds it back, ft = the settle that
-- ended it, a = attempts
-- made, due = ms of the next attempt, to = timeout ms, cur = slice of the due
-- entry when it is not the home slice, code / err = last failure, fin = ms,
-- mv = {slice, due, kind}: a move (retry, run now) under way (move.lua).
--
-- Fresh tasks. A task added with a key tickd made and due when it asked
-- (execute_at not in the past) is stored as one :due member, "id\nrecord",
-- scored its execute_at, with no hash entry and no state: its state is
-- scheduled, no attempt yet (fresh_state). That is half the memory of a full
-- one. The claim makes it full (record and state in :task, the id alone in
-- :run); task_state does so before anything else changes it; get.lua reads it
-- where it is. A re-POST cannot name it (its key was never given), but the
-- same add sent again can (rcluster resends a command whose answer was lost):
-- add.lua finds it by ZMSCORE while it is fresh, by its state once it is not.
--
-- Schema 1 keyspaces are read as they are (specs, states, plain members):
-- STORE_SCHEMA 2 is written over 1 at start. There is no way back.
--
-- Changing the schema: bump STORE_SCHEMA in src/store/store.h and the version here; tickd
-- refuses to start on a keyspace whose P:meta schema differs, so a migration
-- is: drain (stop adding, let every slice empty), then start the new version.

-- Bounds: what one call of each script touches, at most. No script walks
-- what exists (every queue, every task, every hold): each is bounded by its
-- arguments (what one caller sends: a claim's batch, a settle's outcomes, a
-- page's limit) or by a constant here. Keep it so, and write the bound of a
-- new script or op below.
--   add      the tasks given (a batch: at most 1000); each also reads the
--            fresh members of its slice due at that very ms (fresh_find)
--   cancel, fetch, get, move, ptr, wm
--            one task (fresh_find as above) or one key
--   claim    ARGV limit (scheduler.batch) expired leases and due ids
--   settle   the outcomes given (at most SETTLE_BATCH, 256: store_redis.c)
--   list     ARGV limit ids out, SCAN_MAX (20000) entries looked at a call;
--            the caller goes on from the last one
--   sched    one schedule; list: ARGV limit; claim: 4 x ARGV limit
--   flow     admit, enqueue: the tasks given (at most FLOW_CALL_MAX, 128:
--            core/scheduler.c); pump: the ends given (as many), then PUMP_QUEUES
--            (64) queues by SSCAN from where the last pump stopped and
--            PUMP_BUDGET (1024) waiting tasks in all, a hold evicted per
--            hold set past holds_max; snapshot: PAGE (256) changes, ended
--            holds and dropped deletions, and an upgrade's HSCAN page of cfg
--            and n; put, get, count: one key (count: the queues given, at
--            most 16); list: ARGV limit (at most 200) entries of idx, each a
--            handful of single-key reads
--
-- The string functions the per-task paths call, as locals (string.find
-- is two table reads a call).
local str_find, str_sub, str_match, str_byte = string.find, string.sub, string.match, string.byte

-- The queue a task's state counts it in (add.lua): nil for a task stored
-- before states named it (never counted, so never counted off).
local function state_queue(st)
  if st.q == 1 then return 'default' end
  return st.q
end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Numbers in the JSON the scripts write. Redis's cjson writes 14
-- significant digits (and refuses to be set to more): an integer of 15
-- digits, a time in ms after the year 5138, would come back changed. A task's
-- times never get there (at most ten years ahead: src/model/task.h), but a
-- schedule's next run may be as late as 9999 (TASK_TIME_MAX_MS): its state is
-- written by json_exact, which writes such integers in full and the rest as
-- cjson does. An integer below 2^53 in full is what '%.0f' prints.
local function json_big(v)
  return type(v) == 'number' and v == math.floor(v) and (v >= 1e14 or v <= -1e14) and
         v < 2^53 and v > -2^53
end

local function json_has_big(v)
  if json_big(v) then return true end
  if type(v) ~= 'table' then return false end
  for _, x in pairs(v) do
    if json_has_big(x) then return true end
  end
  return false
end

local function json_exact(v)
  if not json_has_big(v) then return cjson.encode(v) end
  if json_big(v) then return string.format('%.0f', v) end
  local n, parts = 0, {}
  for _ in pairs(v) do n = n + 1 end
  if n == #v then
    for i = 1, n do parts[i] = json_exact(v[i]) end
    return '[' .. table.concat(parts, ',') .. ']'
  end
  for k, x in pairs(v) do
    parts[#parts + 1] = cjson.encode(tostring(k)) .. ':' .. json_exact(x)
  end
  return '{' .. table.concat(parts, ',') .. '}'
end

local function state_get(task, id)
  local s = redis.call('HGET', task, 's:' .. id)
  if not s then return nil end
  return cjson.decode(s)
end

local function state_put(task, id, st)
  redis.call('HSET', task, 's:' .. id, cjson.encode(st))
end

-- The execute_at of an id (src/model/task.h: "<slice>.<execute_at ms>.<key>",
-- the slice "minute.b") as its digits, and where its key begins (plain
-- finds, not a pattern: the claim reads every due id); nil for what is not
-- an id.
local function id_at_text(id)
  local a = str_find(id, '.', 1, true)
  local b = a and str_find(id, '.', a + 1, true)
  local c = b and str_find(id, '.', b + 1, true)
  if not c then return nil end
  local at = str_sub(id, b + 1, c - 1)
  if not str_find(at, '^%d+$') then return nil end
  return at, c + 1
end

-- a < b byte by byte, the order Redis gives the members of one score (Lua's
-- own < follows the collation of the locale Redis was started in).
local function bytes_lt(a, b)
  if a == b then return false end
  for i = 1, math.min(#a, #b) do
    local x, y = str_byte(a, i), str_byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end

-- The execute_at as a number, and the key; nil, '' for what is not an id.
local function id_at(id)
  local at, k = id_at_text(id)
  if not at then return nil, '' end
  return tonumber(at), str_sub(id, k)
end

-- A fresh task's member in :due: member, record, due; or nil.
local function fresh_find(due, id)
  local at = id_at(id)
  if not at then return nil end
  local p = id .. '\n'
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', due, at, at)) do
    if string.sub(m, 1, #p) == p then return m, string.sub(m, #p + 1), at end
  end
  return nil
end

-- The timeout a task has when none is given: TASK_DEFAULT_TIMEOUT_MS of
-- src/model/task.h.
local REC_TIMEOUT_DEFAULT = '10000'

-- A record's timeout (its digits) and queue ('' = the default)
-- (src/model/task.h: url, method, timeout_ms, queue, ...). The url, the
-- longest line, is passed by a plain find; the pattern reads the short lines
-- after it. With head, also where the queue's line ends (the record's first
-- four parts are rec's bytes before it). A record whose timeout cannot be
-- read (no tickd writes one; another program might) has the default's and
-- the default queue: tickd finds the record bad and fails its attempt with
-- that reason, where a nil here would fail the script (the claim: every
-- claim of the slice after it).
local function rec_to_queue(rec, head)
  local a = str_find(rec, '\n', 1, true)
  local to, q, e
  if a and head then
    to, q, e = str_match(rec, '^[^\n]*\n(%d+)\n([^\n]*)\n()', a + 1)
  elseif a then
    to, q = str_match(rec, '^[^\n]*\n(%d+)\n([^\n]*)\n', a + 1)
  end
  if not to then return REC_TIMEOUT_DEFAULT, nil end
  return to, q, e
end

-- The state a fresh task has (its record: src/model/task.h).
local function fresh_state(rec, due)
  local to, q = rec_to_queue(rec)
  return {s = 'scheduled', a = 0, due = due, to = tonumber(to),
          q = (q == nil or q == '') and 1 or q}
end

-- The state of a task claimed for its first attempt, and that state once it
-- succeeded, written as text from the parts they are made of (numbers as the
-- digits they came as): cjson writes each number through snprintf('%.14g'),
-- and with the decode and encode of the settle that was the largest part of
-- what a task cost Redis. Any other state goes through cjson; the two forms
-- are the same JSON to every reader. settle reads a state of the first form
-- as STATE_RUN1_HEAD (a plain find) then STATE_RUN1_Q from the byte after it
-- (due and to digits, q's JSON text), and writes the succeeded one with that
-- text as it is.
local STATE_RUN1_HEAD = '{"s":"running","a":0,"due":'
local STATE_RUN1_Q = '^%d+,"to":%d+,"q":(.*)}$'

-- The JSON of q, the queue of a record ('' = the default), in such a state.
local function state_run1_queue(q)
  if q == nil or q == '' then return '1' end
  if string.find(q, '^[%w._-]+$') then return '"' .. q .. '"' end
  return cjson.encode(q)
end

-- due, to: digits; qj: state_run1_queue's
local function state_run1(due, to, qj)
  return STATE_RUN1_HEAD .. due .. ',"to":' .. to .. ',"q":' .. qj .. '}'
end

-- A time in ms, or another integer below 2^53, as its digits.
local function int_text(v)
  return string.format('%d', v)
end

-- The state of task id of this home slice (KEYS due, task), a fresh one made
-- full first; nil when there is no such task.
local function task_state(due, task, id)
  local st = state_get(task, id)
  if st then return st end
  local m, rec, at = fresh_find(due, id)
  if not m then return nil end
  st = fresh_state(rec, at)
  redis.call('HSET', task, id, rec, 's:' .. id, cjson.encode(st))
  redis.call('ZADD', due, at, id)
  redis.call('ZREM', due, m)
  return st
end

-- The lease index's pin. Redis keeps a sorted set of at most
-- zset-max-listpack-entries (128) members of at most zset-max-listpack-value
-- (64) bytes as one packed list, which every ZADD and ZREM walks: a slice's
-- :run holds only the leases in flight, a few dozen ids of about 52 bytes, so
-- it stayed a list, and walking it was a fifth of what a callback cost Redis.
-- A member longer than that keeps it a skiplist (O(log n)): the claim adds the
-- pin with its leases, scored +inf (never an expired lease), and it goes with
-- the last lease (run_unpin). It is never a task: run_count leaves it out, and
-- the listing skips it.
local RUN_PIN = '#pin: a member longer than zset-max-listpack-value keeps the lease index a skiplist'

-- A slice's task hash is pinned the same way, by a field whose value is
-- longer than hash-max-listpack-value (64): the claim writes each task's
-- record and state there, about 50 bytes each for a short callback, and the
-- first 256 tasks of a slice would each walk the packed list (512 fields).
-- The add that makes the hash writes it (add.lua); the claim writes it again
-- with the states (a hash made by an older build). The field goes with the
-- hash (it expires with the slice's records).
local TASK_PIN_FIELD = '#pin'
local TASK_PIN = 'a value longer than hash-max-listpack-value keeps this hash a hash table'

-- The leases in run (KEYS run): every member scored below +inf, the pin
-- left out.
local function run_count(run)
  return redis.call('ZCOUNT', run, '-inf', '(+inf')
end

-- After leases left run: with the last of them, the pin goes (and the key).
-- Returns the leases left.
local function run_unpin(run)
  local n = run_count(run)
  if n == 0 then redis.call('DEL', run) end
  return n
end

-- Many-argument commands in pieces: unpack() of more than a few thousand
-- values fails. bulk_write(cmd, key, list) sends list after key (pairs stay
-- together: the piece size is even); bulk_read does the same for commands
-- that answer one value per argument (HMGET) and joins the
-- answers (one piece's answer is returned as it came). An empty list sends
-- nothing.
local BULK = 4000

-- (returns the sum of what the calls answered: ZADD's members added, ...;
-- from: the list's first index sent, 1 when not given)
local function bulk_write(cmd, key, list, from)
  local n = 0
  for i = from or 1, #list, BULK do
    n = n + redis.call(cmd, key, unpack(list, i, math.min(i + BULK - 1, #list)))
  end
  return n
end

local function bulk_read(cmd, key, list)
  if #list <= BULK then
    if #list == 0 then return {} end
    return redis.call(cmd, key, unpack(list))
  end
  local res = {}
  for i = 1, #list, BULK do
    local r = redis.call(cmd, key, unpack(list, i, math.min(i + BULK - 1, #list)))
    for j = 1, #r do res[i + j - 1] = r[j] end
  end
  return res
end

-- A task of this slice became final. Once no task of the slice is open, its
-- records expire after the retention (failed_retention when it holds a
-- failed task: the dead letters are kept longer); until then nothing in it
-- has a TTL. fin: the keys that expire with the records (task, del, ok,
-- failed, cancelled), failed among them at index 4.
local function close_slice(fin, n, now, retention, failed_retention)
  if redis.call('HINCRBY', fin[1], '#open', -n) <= 0 then
    local ttl = retention
    -- dead letters (failed, and expired: fin[6]) keep their slice longer
    if failed_retention > ttl and (redis.call('ZCARD', fin[4]) > 0 or
                                   (fin[6] and redis.call('ZCARD', fin[6]) > 0)) then
      ttl = failed_retention
    end
    for _, k in ipairs(fin) do redis.call('PEXPIREAT', k, now + ttl) end
  end
end

-- A closed slice opens again (a task added, or one made to run again).
local function open_slice(fin)
  for _, k in ipairs(fin) do redis.call('PERSIST', k) end
end

-- The expires_at (ms) of task id's record in the task hash, or nil: the
-- last part of a record (task.h), or a spec stored whole (schema 1).
local function task_expires(task_key, id)
  local rec = redis.call('HGET', task_key, id)
  if not rec then return nil end
  local rest = string.sub(rec, 1, 1) == '{' and rec or string.match(rec, '\n([^\n]*)$')
  local ok, o = pcall(cjson.decode, rest or '')
  return ok and type(o) == 'table' and tonumber(o.expires_at) or nil
end

-- Commit the move st.mv of task id (move.lua): KEYS are the home slice's
-- due, task, del, ok, failed, cancelled, expired. Returns the new state, and the
-- queue whose count it joins again when it ended before (a retry), else ''.
local function move_commit(K, id, st)
  local mv = st.mv
  st.mv = nil
  local reopened = ''
  if mv.kind == 'retry' then
    if st.s ~= 'failed' and st.s ~= 'cancelled' then state_put(K[2], id, st); return st, '' end
    reopened = state_queue(st) or ''
    redis.call('ZREM', K[5], id)
    redis.call('ZREM', K[6], id)
    redis.call('ZREM', K[7], id)
    redis.call('SREM', K[3], id)
    redis.call('ZREM', K[1], id)
    open_slice({K[2], K[3], K[4], K[5], K[6], K[7]})
    redis.call('HINCRBY', K[2], '#open', 1)
    st.s = 'scheduled'
    st.a = 0
    st.fin = nil
  elseif st.s ~= 'scheduled' then
    state_put(K[2], id, st)
    return st, ''
  else
    -- run now: the entry where it was goes (a pointer elsewhere is dropped
    -- when claimed: it is no longer st.cur)
    if not st.cur then redis.call('ZREM', K[1], id) end
  end
  st.due = mv.due
  if mv.slice == '' then
    st.cur = nil
    redis.call('ZADD', K[1], mv.due, id)
  else
    st.cur = mv.slice
  end
  state_put(K[2], id, st)
  return st, reopened
end

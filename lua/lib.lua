-- lib.lua: prepended by tickd to every other script in this directory before
-- SCRIPT LOAD, so the helpers below exist once.
--
-- Key schema v1 (P = the configured prefix, S = one slice = one UTC minute x
-- one bucket, "YYYYMMDDHHMM.b"). Every key of a slice has the hash tag {S}, so
-- each script call touches one cluster slot.
--   P:{S}:due   ZSET  task id -> due time (ms)
--   P:{S}:task  HASH  id -> task spec (JSON, as validated by the API)
--                     s:<id> -> state (JSON, below)
--                     #open -> count of tasks of this slice not yet final
--   P:{S}:del   SET   ids cancelled while in :due (lazy delete; claim drops them)
--   P:{S}:run   ZSET  claimed id -> lease deadline (ms); expired = claim again
--   P:{S}:ptr   HASH  id -> timeout ms, for retries whose record lives in an
--                     earlier slice (the id names that home slice)
--   P:wm:{b}    STRING minute number of bucket b's oldest undrained slice
--   P:meta      HASH  schema, buckets
--   P:{sc.b}:sdef  HASH  schedule id -> definition; s:<id> -> state (src/store.h)
--   P:{sc.b}:snext ZSET  active schedule id -> next run (ms), or its lease's end
--   P:{sc.b}:sall  ZSET  every schedule id of bucket b, score 0 (listing by id)
-- State JSON: s = scheduled|running|succeeded|failed|cancelled, a = attempts
-- made, due = ms of the next attempt, to = timeout ms, cur = slice of the due
-- entry when it is not the home slice, code / err = last failure, fin = ms.
--
-- Changing the schema: bump STORE_SCHEMA in src/store.h and the version here; tickd
-- refuses to start on a keyspace whose P:meta schema differs, so a migration
-- is: drain (stop adding, let every slice empty), then start the new version.

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function state_get(task, id)
  local s = redis.call('HGET', task, 's:' .. id)
  if not s then return nil end
  return cjson.decode(s)
end

local function state_put(task, id, st)
  redis.call('HSET', task, 's:' .. id, cjson.encode(st))
end

-- Many-argument commands in pieces: unpack() of more than a few thousand
-- values fails. bulk_write(cmd, key, list) sends list after key (pairs stay
-- together: the piece size is even); bulk_read does the same for commands
-- that answer one value per argument (HMGET) and joins the
-- answers. An empty list sends nothing.
local BULK = 4000

local function bulk_write(cmd, key, list)
  for i = 1, #list, BULK do
    redis.call(cmd, key, unpack(list, i, math.min(i + BULK - 1, #list)))
  end
end

local function bulk_read(cmd, key, list)
  local res = {}
  for i = 1, #list, BULK do
    local r = redis.call(cmd, key, unpack(list, i, math.min(i + BULK - 1, #list)))
    for j = 1, #r do res[i + j - 1] = r[j] end
  end
  return res
end

-- A task of this slice became final. Once no task of the slice is open, its
-- records expire after the retention; until then nothing in it has a TTL.
local function close_task(task, del, now, retention)
  if redis.call('HINCRBY', task, '#open', -1) <= 0 then
    redis.call('PEXPIREAT', task, now + retention)
    redis.call('PEXPIREAT', del, now + retention)
  end
end

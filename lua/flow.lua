-- flow: queues and destinations with limits (src/flow.h), cluster-wide.
-- Every key has the hash tag {flow}: one slot, so a queue's and a
-- destination's limits are checked and taken together, atomically.
-- KEYS[1] = P:{flow}:cfg; the others are named from it:
--   cfg     HASH  q:<queue> | d:<destination> -> settings JSON
--                 {rate, burst, max_concurrency, paused} (flow.c checks them)
--   tat     HASH  q:.. | d:.. -> GCRA theoretical arrival time (ms)
--   until   HASH  destination -> no callback before (ms): its Retry-After
--   w:<q>   ZSET  waiting task id -> its due time (oldest first)
--   wi      HASH  id -> {q, d, s = slice of its parked entry, to = timeout,
--                 r = why it waits, od = due, a = send time once a pump let
--                 it go, g = 1 once a claim of it was told to go}
--   wq      SET   queues with waiting tasks
--   wa      ZSET  id let go by a pump -> its lease end: wi entries whose task
--                 never came to claim it (cancelled meanwhile) are swept
--   h:q:<queue>, h:d:<destination>
--           ZSET  id of a callback let go -> its lease end: the counted
--                 semaphore; a slot whose lease ended is free again
--   f:<queue>:<minute>  STRING  tasks of the queue that failed that minute
--   n       HASH  queue -> its tasks not yet ended (the store adds and takes
--                 away as tasks are stored and end: store_redis.c)
-- ARGV[1] = op (admit | enqueue | pump | snapshot | put | get | list), the
-- rest per op, below. Times are Redis's clock.
local base = string.sub(KEYS[1], 1, -4)
local CFG, TAT, UNTIL, WI, WQ = KEYS[1], base .. 'tat', base .. 'until', base .. 'wi', base .. 'wq'
local now = now_ms()
local op = ARGV[1]
local SCAN = 256          -- waiting tasks a pump looks at per queue
local HOUR = 60

local confs = {}
local function conf(k)
  local c = confs[k]
  if c == nil then
    local raw = redis.call('HGET', CFG, k)
    c = raw and cjson.decode(raw) or false
    confs[k] = c
  end
  return c
end

local function holders(k) return base .. 'h:' .. k end

-- 1 when k (q:.. or d:..) has a callback slot free
local function slot_free(k, c)
  if not c or not c.max_concurrency then return true end
  redis.call('ZREMRANGEBYSCORE', holders(k), '-inf', now)
  return redis.call('ZCARD', holders(k)) < c.max_concurrency
end

-- GCRA: the earliest time k's rate lets one more callback go
local function rate_at(k, c)
  if not c or not c.rate then return now end
  local tat = tonumber(redis.call('HGET', TAT, k) or '0')
  return math.max(now, tat - 1000 / c.rate * ((c.burst or 1) - 1))
end

local function rate_take(k, c, at)
  if not c or not c.rate then return end
  local tat = tonumber(redis.call('HGET', TAT, k) or '0')
  redis.call('HSET', TAT, k, tostring(math.max(tat, at) + 1000 / c.rate))
end

-- a callback let go that did not go: its place in the rate is given back
local function rate_refund(k)
  local c = conf(k)
  if not c or not c.rate then return end
  local tat = tonumber(redis.call('HGET', TAT, k) or '0')
  if tat > now then redis.call('HSET', TAT, k, tostring(math.max(now, tat - 1000 / c.rate))) end
end

-- Why a task of queue q to destination d cannot go within `horizon` ms:
-- reason and scope ('q': nothing of the queue can go, 'd': this
-- destination), or nil and the time it may go.
local function blocked(q, d, horizon)
  local qk, dk = 'q:' .. q, 'd:' .. d
  local qc, dc = conf(qk), conf(dk)
  if qc and qc.paused then return 'paused', 'q' end
  if not slot_free(qk, qc) then return 'concurrency', 'q' end
  if not slot_free(dk, dc) then return 'concurrency', 'd' end
  local qa = rate_at(qk, qc)
  if qa > now + horizon then return 'rate', 'q' end
  local at = math.max(qa, rate_at(dk, dc), tonumber(redis.call('HGET', UNTIL, d) or '0'))
  if at > now + horizon then return 'rate', 'd' end
  return nil, at
end

-- Let a callback go at `at`: take its place in the rates, and a slot held
-- until its lease ends (kept for every configured queue and destination,
-- limited or not: the slots are the in-flight count).
local function let_go(id, q, d, at, to, margin)
  local qk, dk = 'q:' .. q, 'd:' .. d
  local qc, dc = conf(qk), conf(dk)
  rate_take(qk, qc, at)
  rate_take(dk, dc, at)
  local lease = at + to + margin
  if qc then
    redis.call('ZREMRANGEBYSCORE', holders(qk), '-inf', now)
    redis.call('ZADD', holders(qk), lease, id)
  end
  if dc then
    redis.call('ZREMRANGEBYSCORE', holders(dk), '-inf', now)
    redis.call('ZADD', holders(dk), lease, id)
  end
end

-- Answer task id let go (wi: its info, wi.a its send time) to the replica
-- that takes its parked entry: id, slice of its parked entry, the time the
-- entry is due, queue, destination. The entry is due at its send time; one
-- that may go at once at its own due time, so that the claims of many let go
-- at once fire them oldest first.
local function answer_go(out, id, wi)
  out[#out + 1] = id; out[#out + 1] = wi.s
  out[#out + 1] = (wi.a <= now) and wi.od or wi.a
  out[#out + 1] = wi.q; out[#out + 1] = wi.d
end

local function holds(id, q, d)
  local s = redis.call('ZSCORE', holders('q:' .. q), id) or
            redis.call('ZSCORE', holders('d:' .. d), id)
  return s and tonumber(s) > now
end

-- the reason a task queued behind others gives
local function behind(q, d)
  local qc, dc = conf('q:' .. q) or {}, conf('d:' .. d) or {}
  if qc.paused then return 'paused' end
  if qc.max_concurrency or dc.max_concurrency then
    if not (qc.rate or dc.rate) then return 'concurrency' end
  end
  return 'rate'
end

if op == 'admit' then
  -- ARGV: horizon, margin, then per task: id, queue, destination, timeout
  -- Returns per task: 'go', send time, due it waited from (0: none), reason
  -- | 'wait', reason
  local horizon, margin = tonumber(ARGV[2]), tonumber(ARGV[3])
  local out = {}
  for i = 4, #ARGV, 4 do
    local id, q, d, to = ARGV[i], ARGV[i + 1], ARGV[i + 2], tonumber(ARGV[i + 3])
    local raw = redis.call('HGET', WI, id)
    local wi = raw and cjson.decode(raw)
    local res
    if wi and wi.a then
      if holds(id, wi.q, wi.d) and wi.a > now + horizon then
        -- let go for later than this claim's lease covers: the claim of
        -- its taken entry sends it
        res = {'wait', wi.r}
      elseif holds(id, wi.q, wi.d) then
        res = {'go', math.max(now, wi.a), wi.od, wi.r}
        -- its callback goes: a take that missed its entry (claimed by this
        -- very claim) must not free the slot nor queue it again
        if not wi.g then
          wi.g = 1
          redis.call('HSET', WI, id, cjson.encode(wi))
        end
      else
        redis.call('HDEL', WI, id)   -- its slot's lease ended: it goes as new
      end
    elseif wi and redis.call('ZSCORE', base .. 'w:' .. wi.q, id) then
      res = {'wait', wi.r}           -- a parked entry came back: still waiting
    end
    if not res then
      local why, at = blocked(q, d, horizon)
      if not why and redis.call('ZCARD', base .. 'w:' .. q) > 0 then why = behind(q, d) end
      if why then
        res = {'wait', why}
      else
        let_go(id, q, d, at, to, margin)
        res = {'go', at, 0, ''}
      end
    end
    for _, v in ipairs(res) do out[#out + 1] = v end
  end
  return out
elseif op == 'enqueue' then
  -- ARGV: per task: id, queue, destination, due, timeout, slice, reason
  -- Returns, as pump does, the tasks a pump let go meanwhile: their take
  -- (made by the pump's replica in the slice it knew) missed the entry,
  -- which the claim parking it held, unless it was parked in that same
  -- slice; the caller takes them where they are parked now (and the miss of
  -- the take in the slice they left is not counted: pump).
  local out = {}
  for i = 2, #ARGV, 7 do
    local id, q = ARGV[i], ARGV[i + 1]
    local raw = redis.call('HGET', WI, id)
    local old = raw and cjson.decode(raw)
    if old and old.a and holds(id, old.q, old.d) then
      -- its take must find the entry where it now waits
      old.s = ARGV[i + 5]
      old.x = nil
      redis.call('HSET', WI, id, cjson.encode(old))
      if not old.g then answer_go(out, id, old) end
    else
      local od = old and old.od or tonumber(ARGV[i + 3])
      redis.call('ZADD', base .. 'w:' .. q, 'NX', od, id)
      redis.call('HSET', WI, id, cjson.encode({q = q, d = ARGV[i + 2], od = od,
                 to = tonumber(ARGV[i + 4]), s = ARGV[i + 5], r = ARGV[i + 6]}))
      redis.call('SADD', WQ, q)
    end
  end
  return out
elseif op == 'pump' then
  -- ARGV: horizon, margin, max, then per ended callback: id, queue,
  -- destination, no callback to it before (ms, 0: no Retry-After), end
  -- (0: ended, 1: the task ended failed, 2: let go but its parked entry was
  -- not there to take: it waits again, first in line, at most 3 times),
  -- and for 2 the slice the take looked in ('' otherwise): a take in a
  -- slice the task has left since (an enqueue moved it and answered it) is
  -- not a miss.
  -- Frees their slots, then lets waiting tasks go, oldest first per queue,
  -- at most max.
  -- Returns per task let go: id, slice of its parked entry, the time its
  -- entry is due (its send time, or its due time when it may go at once),
  -- queue, destination.
  local horizon, margin, max = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
  for i = 5, #ARGV, 6 do
    local id, q, d, u = ARGV[i], ARGV[i + 1], ARGV[i + 2], tonumber(ARGV[i + 3])
    local back = ARGV[i + 4] == '2'
    local raw = back and redis.call('HGET', WI, id)
    local wi = raw and cjson.decode(raw)
    if wi and wi.g then
      -- a claim of it was told to go: its own end frees the slot
    elseif wi and wi.a and wi.s ~= ARGV[i + 5] then
      -- its take looked where it no longer waits: the enqueue that moved it
      -- answered it, and that take stands
    elseif wi and wi.a and (wi.x or 0) < 3 then
      -- the claim that parks it again had not written its entry back yet
      rate_refund('q:' .. q)
      rate_refund('d:' .. d)
      redis.call('ZREM', holders('q:' .. q), id)
      redis.call('ZREM', holders('d:' .. d), id)
      redis.call('ZREM', base .. 'wa', id)
      wi.a = nil
      wi.x = (wi.x or 0) + 1
      redis.call('HSET', WI, id, cjson.encode(wi))
      redis.call('ZADD', base .. 'w:' .. q, wi.od, id)
      redis.call('SADD', WQ, q)
    else
      redis.call('ZREM', holders('q:' .. q), id)
      redis.call('ZREM', holders('d:' .. d), id)
      redis.call('ZREM', base .. 'wa', id)
      redis.call('HDEL', WI, id)
    end
    if u > now and u > tonumber(redis.call('HGET', UNTIL, d) or '0') then
      redis.call('HSET', UNTIL, d, u)
    end
    if ARGV[i + 4] == '1' then
      local k = base .. 'f:' .. q .. ':' .. math.floor(now / 60000)
      redis.call('INCR', k)
      redis.call('PEXPIRE', k, (HOUR + 1) * 60000)
    end
  end
  -- the info of tasks let go that no claim came for (cancelled while they
  -- waited) goes once their lease is over
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', base .. 'wa', '-inf', now, 'LIMIT', 0, 100)) do
    redis.call('ZREM', base .. 'wa', id)
    local raw = redis.call('HGET', WI, id)
    local wi = raw and cjson.decode(raw)
    if wi and wi.a and not holds(id, wi.q, wi.d) then redis.call('HDEL', WI, id) end
  end
  local out = {}
  for _, q in ipairs(redis.call('SMEMBERS', WQ)) do
    if #out >= max * 5 then break end
    local qc = conf('q:' .. q)
    local wkey = base .. 'w:' .. q
    -- oldest first; a task whose destination is held back lets the ones
    -- behind it go (a destination found held is not asked again)
    local dheld, from, done = {}, 0, qc and qc.paused
    while not done and from < SCAN * 4 do
      local ids = redis.call('ZRANGE', wkey, from, from + SCAN - 1)
      if #ids < SCAN then done = true end
      from = from + SCAN
      for _, id in ipairs(ids) do
        if #out >= max * 5 then done = true; break end
        local raw = redis.call('HGET', WI, id)
        if not raw then
          redis.call('ZREM', wkey, id)
          from = from - 1
        else
          local wi = cjson.decode(raw)
          if not dheld[wi.d] then
            local why, at = blocked(q, wi.d, horizon)
            if why and at == 'q' then done = true; break end
            if why then
              dheld[wi.d] = true
            else
              let_go(id, q, wi.d, at, wi.to, margin)
              wi.a = at
              redis.call('HSET', WI, id, cjson.encode(wi))
              redis.call('ZADD', base .. 'wa', at + wi.to + margin, id)
              redis.call('ZREM', wkey, id)
              from = from - 1
              answer_go(out, id, wi)
            end
          end
        end
      end
    end
    if redis.call('ZCARD', wkey) == 0 then redis.call('SREM', WQ, q) end
  end
  return out
elseif op == 'snapshot' then
  -- Returns {cfg (flat HGETALL), until (destination, ms, ...: the ones not
  -- past), tasks waiting}
  local u, live = redis.call('HGETALL', UNTIL), {}
  for i = 1, #u, 2 do
    if tonumber(u[i + 1]) > now then live[#live + 1] = u[i]; live[#live + 1] = u[i + 1]
    else redis.call('HDEL', UNTIL, u[i]) end
  end
  local waiting = 0
  for _, q in ipairs(redis.call('SMEMBERS', WQ)) do
    waiting = waiting + redis.call('ZCARD', base .. 'w:' .. q)
  end
  return {redis.call('HGETALL', CFG), live, waiting}
elseif op == 'put' then
  -- ARGV: key (q:.. | d:..), settings JSON ('' deletes), or 'pause' |
  -- 'resume' as ARGV[4] to set only that (a queue's settings made if none)
  if ARGV[4] == 'pause' or ARGV[4] == 'resume' then
    local raw = redis.call('HGET', CFG, ARGV[2])
    local c = raw and cjson.decode(raw) or {}
    c.paused = ARGV[4] == 'pause'
    redis.call('HSET', CFG, ARGV[2], cjson.encode(c))
    return 1
  end
  if ARGV[3] == '' then
    local gone = redis.call('HDEL', CFG, ARGV[2])
    redis.call('HDEL', TAT, ARGV[2])
    return gone
  end
  local raw = redis.call('HGET', CFG, ARGV[2])
  local was, now_c = raw and cjson.decode(raw) or {}, cjson.decode(ARGV[3])
  redis.call('HSET', CFG, ARGV[2], ARGV[3])
  -- a rate changed: the next callback goes on the new one (the same rate
  -- set again keeps its place: no fresh burst)
  if was.rate ~= now_c.rate or was.burst ~= now_c.burst then redis.call('HDEL', TAT, ARGV[2]) end
  return 1
end

-- get / list: ARGV[2] = key, or '' for every queue and destination.
-- Returns per key: key, settings JSON (false: none), waiting, in flight,
-- failed in the last hour (queues), no callback before (destinations, ms),
-- tasks not yet ended (queues)
local function info(k)
  local kind, name = string.sub(k, 1, 1), string.sub(k, 3)
  local waiting, failed, u, open = 0, 0, 0, 0
  if kind == 'q' then
    waiting = redis.call('ZCARD', base .. 'w:' .. name)
    open = math.max(0, tonumber(redis.call('HGET', base .. 'n', name) or '0'))
    local keys, m = {}, math.floor(now / 60000)
    for i = 0, HOUR - 1 do keys[#keys + 1] = base .. 'f:' .. name .. ':' .. (m - i) end
    for _, v in ipairs(redis.call('MGET', unpack(keys))) do failed = failed + (tonumber(v) or 0) end
  else
    u = tonumber(redis.call('HGET', UNTIL, name) or '0')
    if u <= now then u = 0 end
  end
  return {k, redis.call('HGET', CFG, k) or false, waiting,
          redis.call('ZCOUNT', holders(k), '(' .. now, '+inf'), failed, u, open}
end

local out = {}
if ARGV[2] ~= '' then
  for _, v in ipairs(info(ARGV[2])) do out[#out + 1] = v end
  return out
end
local seen = {}
local keys = redis.call('HKEYS', CFG)
for _, q in ipairs(redis.call('SMEMBERS', WQ)) do keys[#keys + 1] = 'q:' .. q end
local n = redis.call('HGETALL', base .. 'n')
for i = 1, #n, 2 do
  if tonumber(n[i + 1]) > 0 then keys[#keys + 1] = 'q:' .. n[i] end
end
table.sort(keys)
for _, k in ipairs(keys) do
  if not seen[k] then
    seen[k] = true
    for _, v in ipairs(info(k)) do out[#out + 1] = v end
  end
end
return out

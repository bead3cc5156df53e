-- flow: queues and destinations with limits (src/core/flow.h), cluster-wide.
-- Every key has the hash tag {flow}: one slot, so a queue's and a
-- destination's limits are checked and taken together, atomically.
-- KEYS[1] = P:{flow}:cfg; the others are named from it:
--   cfg     HASH  q:<queue> | d:<destination> -> settings JSON
--                 {rate, burst, max_concurrency, paused} (flow.c checks them)
--   tat     HASH  q:.. | d:.. -> GCRA theoretical arrival time (ms)
--   hold    ZSET  destination -> no callback before (ms): its Retry-After;
--                 at most holds_max (pump), the soonest to end dropped first;
--                 ended ones dropped by snapshot, a bounded number a call
--   w:<q>   ZSET  waiting task id -> its due time (oldest first)
--   wi      HASH  id -> {q, d, s = slice of its parked entry, to = timeout,
--                 r = why it waits, od = due, a = send time once a pump let
--                 it go, g = 1 once a claim of it was told to go}
--   wq      SET   queues with waiting tasks (pump walks it with SSCAN from
--                 wqcur, a bounded number of queues a call)
--   wn      STRING tasks waiting, all queues (w:<q> members)
--   wa      ZSET  id let go by a pump -> its lease end: wi entries whose task
--                 never came to claim it (cancelled meanwhile) are swept
--   h:q:<queue>, h:d:<destination>
--           ZSET  id of a callback let go -> its lease end: the counted
--                 semaphore; a slot whose lease ended is free again
--   fh:<queue>  HASH  minute -> tasks of the queue that failed that minute
--                 (the last HOUR + 1 minutes; the key expires an hour after
--                 the last failure)
--   n       HASH  queue -> its tasks not yet ended (the store adds and takes
--                 away as tasks are stored and end: store_redis.c, op count);
--                 a count back at 0 is dropped
--   idx     ZSET  q:<queue> | d:<destination>, score 0: what the listing pages
--                 through (ZRANGEBYLEX): queues with settings, waiting or
--                 open tasks, destinations with settings; dropped when none
--   ver     STRING the last change number; chg ZSET q:.. | d:.. -> the change
--                 number of its last change (settings, hold): replicas read
--                 the changes since the number they have (snapshot);
--                 chgdel ZSET key -> when its settings went (ms): after
--                 TOMB_MS the entry leaves chg, and chgfloor (the highest
--                 number so dropped) sends a replica further behind to a
--                 copy from scratch
--   mig     HASH  upgrade of a keyspace written before idx / chg: HSCAN
--                 cursors of cfg and n (snapshot indexes a page a call)
-- ARGV[1] = op (admit | enqueue | pump | snapshot | put | get | list |
-- count), the rest per op, below. Times are Redis's clock. Each op's bound
-- is in lib.lua.
local base = string.sub(KEYS[1], 1, -4)
local CFG, TAT, HOLD, WI, WQ = KEYS[1], base .. 'tat', base .. 'hold', base .. 'wi', base .. 'wq'
local N, IDX, WN = base .. 'n', base .. 'idx', base .. 'wn'
local VER, CHG, CHGDEL, FLOOR = base .. 'ver', base .. 'chg', base .. 'chgdel', base .. 'chgfloor'
local now = now_ms()
local op = ARGV[1]
local SCAN = 256          -- waiting tasks a pump looks at per queue
local PUMP_QUEUES = 64    -- queues a pump visits (SSCAN COUNT)
local PUMP_BUDGET = 1024  -- waiting tasks a pump looks at, all queues
local PAGE = 256          -- snapshot: changes a call; expiries, upgrade steps
local TOMB_MS = 600000    -- a deleted setting's change is kept this long
local HOUR = 60

-- k (q:.. | d:..) changed: replicas read it again (snapshot)
local function changed(k)
  redis.call('ZADD', CHG, redis.call('INCR', VER), k)
end

local function hold_of(d)
  return tonumber(redis.call('ZSCORE', HOLD, d) or '0')
end

-- the listing shows k while it has settings, waiting or open tasks (a
-- queue), or a hold (a destination)
local function index(k)
  local name = string.sub(k, 3)
  if redis.call('HEXISTS', CFG, k) == 1 or
     (string.sub(k, 1, 1) == 'd' and hold_of(name) > now) or
     (string.sub(k, 1, 1) == 'q' and (tonumber(redis.call('HGET', N, name) or '0') ~= 0 or
                                      redis.call('EXISTS', base .. 'w:' .. name) == 1)) then
    redis.call('ZADD', IDX, 'NX', 0, k)
  else
    redis.call('ZREM', IDX, k)
  end
end

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
  local at = math.max(qa, rate_at(dk, dc), hold_of(d))
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
      if redis.call('ZADD', base .. 'w:' .. q, 'NX', od, id) == 1 then redis.call('INCR', WN) end
      redis.call('HSET', WI, id, cjson.encode({q = q, d = ARGV[i + 2], od = od,
                 to = tonumber(ARGV[i + 4]), s = ARGV[i + 5], r = ARGV[i + 6]}))
      redis.call('SADD', WQ, q)
    end
  end
  return out
elseif op == 'pump' then
  -- ARGV: horizon, margin, max, holds_max, then per ended callback: id, queue,
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
  local holds_max = tonumber(ARGV[5])
  for i = 6, #ARGV, 6 do
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
      if redis.call('ZADD', base .. 'w:' .. q, wi.od, id) == 1 then redis.call('INCR', WN) end
      redis.call('SADD', WQ, q)
    else
      redis.call('ZREM', holders('q:' .. q), id)
      redis.call('ZREM', holders('d:' .. d), id)
      redis.call('ZREM', base .. 'wa', id)
      redis.call('HDEL', WI, id)
    end
    if u > now and u > hold_of(d) then
      redis.call('ZADD', HOLD, u, d)
      redis.call('ZADD', IDX, 'NX', 0, 'd:' .. d)
      changed('d:' .. d)
      -- past the bound the hold that ends soonest goes (at most one a
      -- callback ended here)
      if redis.call('ZCARD', HOLD) > holds_max then
        local gone = redis.call('ZPOPMIN', HOLD)
        if gone[1] and redis.call('HEXISTS', CFG, 'd:' .. gone[1]) == 0 then
          redis.call('ZREM', CHG, 'd:' .. gone[1])
          redis.call('ZREM', IDX, 'd:' .. gone[1])
        end
      end
    end
    if ARGV[i + 4] == '1' then
      local k, m = base .. 'fh:' .. q, math.floor(now / 60000)
      redis.call('HINCRBY', k, m, 1)
      redis.call('PEXPIRE', k, (HOUR + 1) * 60000)
      if redis.call('HLEN', k) > HOUR + 1 then
        local f = redis.call('HKEYS', k)
        for _, x in ipairs(f) do
          if tonumber(x) <= m - HOUR then redis.call('HDEL', k, x) end
        end
      end
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
  -- a bounded number of queues a call, the next ones on the next call
  local sc = redis.call('SSCAN', WQ, redis.call('GET', base .. 'wqcur') or '0', 'COUNT', PUMP_QUEUES)
  redis.call('SET', base .. 'wqcur', sc[1])
  local budget = PUMP_BUDGET
  for _, q in ipairs(sc[2]) do
    if #out >= max * 5 or budget <= 0 then break end
    local qc = conf('q:' .. q)
    local wkey = base .. 'w:' .. q
    -- oldest first; a task whose destination is held back lets the ones
    -- behind it go (a destination found held is not asked again)
    local dheld, from, done = {}, 0, qc and qc.paused
    while not done and from < SCAN * 4 and budget > 0 do
      local ids = redis.call('ZRANGE', wkey, from, from + SCAN - 1)
      if #ids < SCAN then done = true end
      from = from + SCAN
      budget = budget - #ids
      for _, id in ipairs(ids) do
        if #out >= max * 5 then done = true; break end
        local raw = redis.call('HGET', WI, id)
        if not raw then
          redis.call('ZREM', wkey, id)
          redis.call('DECR', WN)
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
              redis.call('DECR', WN)
              from = from - 1
              answer_go(out, id, wi)
            end
          end
        end
      end
    end
    if redis.call('ZCARD', wkey) == 0 then
      redis.call('SREM', WQ, q)
      index('q:' .. q)
    end
  end
  return out
elseif op == 'snapshot' then
  -- ARGV: the change number the replica has (0: none: a copy from scratch)
  -- Returns {fresh (1: the copy starts from scratch), the change number to
  -- ask from next, more (1: more changes follow), tasks waiting, then per
  -- change: key, settings JSON (false: none), its hold (destinations, ms)}
  -- ended holds go, a page a call; a replica drops them itself
  for _, d in ipairs(redis.call('ZRANGEBYSCORE', HOLD, '-inf', now, 'LIMIT', 0, PAGE)) do
    redis.call('ZREM', HOLD, d)
    if redis.call('HEXISTS', CFG, 'd:' .. d) == 0 then
      redis.call('ZREM', CHG, 'd:' .. d)
      redis.call('ZREM', IDX, 'd:' .. d)
    end
  end
  -- deleted settings leave the change list after TOMB_MS
  local floor = tonumber(redis.call('GET', FLOOR) or '0')
  for _, k in ipairs(redis.call('ZRANGEBYSCORE', CHGDEL, '-inf', now - TOMB_MS, 'LIMIT', 0, PAGE)) do
    redis.call('ZREM', CHGDEL, k)
    if redis.call('HEXISTS', CFG, k) == 0 and
       not (string.sub(k, 1, 1) == 'd' and hold_of(string.sub(k, 3)) > now) then
      local v = tonumber(redis.call('ZSCORE', CHG, k) or '0')
      if v > floor then floor = v; redis.call('SET', FLOOR, v) end
      redis.call('ZREM', CHG, k)
    end
  end
  -- a keyspace written before chg and idx: a page of each a call
  local mig = redis.call('HMGET', base .. 'mig', 'cfg', 'n')
  if mig[1] ~= '0' then
    local r = redis.call('HSCAN', CFG, mig[1] or '0', 'COUNT', PAGE)
    for i = 1, #r[2], 2 do
      if not redis.call('ZSCORE', CHG, r[2][i]) then changed(r[2][i]) end
      redis.call('ZADD', IDX, 'NX', 0, r[2][i])
    end
    redis.call('HSET', base .. 'mig', 'cfg', r[1])
  end
  if mig[2] ~= '0' then
    local r = redis.call('HSCAN', N, mig[2] or '0', 'COUNT', PAGE)
    for i = 1, #r[2], 2 do index('q:' .. r[2][i]) end
    redis.call('HSET', base .. 'mig', 'n', r[1])
    if r[1] == '0' and redis.call('SCARD', WQ) <= PAGE then
      local waiting = 0
      for _, q in ipairs(redis.call('SMEMBERS', WQ)) do
        waiting = waiting + redis.call('ZCARD', base .. 'w:' .. q)
      end
      redis.call('SET', WN, waiting)
    end
  end
  local since = tonumber(ARGV[2])
  local fresh = 0
  if since <= 0 or since < floor then since, fresh = 0, 1 end
  local ch = redis.call('ZRANGEBYSCORE', CHG, '(' .. since, '+inf', 'WITHSCORES', 'LIMIT', 0, PAGE)
  local out = {fresh, since, 0, math.max(0, tonumber(redis.call('GET', WN) or '0'))}
  for i = 1, #ch, 2 do
    local k = ch[i]
    out[#out + 1] = k
    out[#out + 1] = redis.call('HGET', CFG, k) or false
    out[#out + 1] = string.sub(k, 1, 1) == 'd' and hold_of(string.sub(k, 3)) or 0
    out[2] = tonumber(ch[i + 1])
  end
  if #ch == PAGE * 2 then out[3] = 1 end
  -- an upgrade under way: its next page at once
  local left = redis.call('HMGET', base .. 'mig', 'cfg', 'n')
  if left[1] ~= '0' or left[2] ~= '0' then out[3] = 1 end
  return out
elseif op == 'put' then
  -- ARGV: key (q:.. | d:..), settings JSON ('' deletes), or 'pause' |
  -- 'resume' as ARGV[4] to set only that (a queue's settings made if none)
  if ARGV[4] == 'pause' or ARGV[4] == 'resume' then
    local raw = redis.call('HGET', CFG, ARGV[2])
    local c = raw and cjson.decode(raw) or {}
    c.paused = ARGV[4] == 'pause'
    redis.call('HSET', CFG, ARGV[2], cjson.encode(c))
    changed(ARGV[2])
    index(ARGV[2])
    return 1
  end
  if ARGV[3] == '' then
    local gone = redis.call('HDEL', CFG, ARGV[2])
    redis.call('HDEL', TAT, ARGV[2])
    if gone == 1 then
      changed(ARGV[2])
      redis.call('ZADD', CHGDEL, now, ARGV[2])
      index(ARGV[2])
    end
    return gone
  end
  local raw = redis.call('HGET', CFG, ARGV[2])
  local was, now_c = raw and cjson.decode(raw) or {}, cjson.decode(ARGV[3])
  redis.call('HSET', CFG, ARGV[2], ARGV[3])
  redis.call('ZREM', CHGDEL, ARGV[2])
  changed(ARGV[2])
  index(ARGV[2])
  -- a rate changed: the next callback goes on the new one (the same rate
  -- set again keeps its place: no fresh burst)
  if was.rate ~= now_c.rate or was.burst ~= now_c.burst then redis.call('HDEL', TAT, ARGV[2]) end
  return 1
end

-- get: ARGV[2] = key. list (below) pages through idx.
-- Returns per key: key, settings JSON (false: none), waiting, in flight,
-- failed in the last hour (queues), no callback before (destinations, ms),
-- tasks not yet ended (queues)
local function info(k)
  local kind, name = string.sub(k, 1, 1), string.sub(k, 3)
  local waiting, failed, u, open = 0, 0, 0, 0
  if kind == 'q' then
    waiting = redis.call('ZCARD', base .. 'w:' .. name)
    open = math.max(0, tonumber(redis.call('HGET', N, name) or '0'))
    local f, m = redis.call('HGETALL', base .. 'fh:' .. name), math.floor(now / 60000)
    for i = 1, #f, 2 do
      if tonumber(f[i]) > m - HOUR then failed = failed + tonumber(f[i + 1]) end
    end
  else
    u = hold_of(name)
    if u <= now then u = 0 end
  end
  return {k, redis.call('HGET', CFG, k) or false, waiting,
          redis.call('ZCOUNT', holders(k), '(' .. now, '+inf'), failed, u, open}
end

if op == 'count' then
  -- ARGV: per queue: name, change of its count of tasks not yet ended
  for i = 2, #ARGV, 2 do
    local q = ARGV[i]
    local v = redis.call('HINCRBY', N, q, ARGV[i + 1])
    if v == 0 then redis.call('HDEL', N, q) end
    if v > 0 then redis.call('ZADD', IDX, 'NX', 0, 'q:' .. q) else index('q:' .. q) end
  end
  return 1
end

if op == 'list' then
  -- ARGV: kind (q | d), after (the last name of the page before; '': from
  -- the start), limit. Returns {next (the last name looked at, '': no
  -- more), then per key as get}: in name order, at most limit; what no
  -- longer has settings, waiting or open tasks leaves the index on the way.
  local kind, after, limit = ARGV[2], ARGV[3], tonumber(ARGV[4])
  if kind == 'q' then redis.call('ZADD', IDX, 'NX', 0, 'q:default') end
  local from = after == '' and '[' .. kind .. ':' or '(' .. kind .. ':' .. after
  local keys = redis.call('ZRANGEBYLEX', IDX, from, '(' .. kind .. ';', 'LIMIT', 0, limit)
  local out = {''}
  if #keys == limit then out[1] = string.sub(keys[#keys], 3) end
  for _, k in ipairs(keys) do
    local it = info(k)
    if it[2] or it[3] > 0 or it[4] > 0 or it[6] > 0 or it[7] > 0 or k == 'q:default' then
      for _, v in ipairs(it) do out[#out + 1] = v end
    else
      index(k)
    end
  end
  return out
end

local out = {}
if ARGV[2] ~= '' then
  for _, v in ipairs(info(ARGV[2])) do out[#out + 1] = v end
  return out
end
return out

-- claim: lease what is due in one slice. Takes expired leases first (their
-- holder died), then ids due before now + reach_ms, oldest first, at most
-- `limit` in all, of which at most `far_limit` due at or after now + near_ms
-- (the room's last places are kept for tasks due soon); each moves to :run
-- with a lease deadline.
-- KEYS: due, task, del, run, ptr. ARGV: reach_ms (how far ahead of now), limit,
-- lease_margin_ms, near_ms, far_limit (the last two: no such cap when absent)
-- Returns {due_left, run_left, taken, then per task leased either its :due
-- member "id\nrecord" (a fresh task, lib.lua: its first attempt, due at the
-- execute_at its id holds) or due_ms, id, attempt, spec}: due_ms an integer,
-- the member a string, so each tells its form; spec (the task's record, or
-- its spec as schema 1 stored it) is nil for a retry pointer (read it from
-- the home slice with fetch); `taken` counts every id consumed, delivered
-- or dropped, so taken == limit means there may be more.
-- Reads and writes go in bulk (one HMGET, HSET, ZADD... for the whole call),
-- not one command per id; every read and check comes before the first write.
local now = now_ms()
local now_text = int_text(now)
local limit = tonumber(ARGV[2])
local margin = tonumber(ARGV[3])
local out = {0, 0, 0}

-- candidates, in order: expired leases, then due ids
local ids, dues, reclaim, taken_due, recs, due_text, member = {}, {}, {}, {}, {}, {}, {}
local exp = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, limit)
for _, id in ipairs(exp) do
  ids[#ids + 1] = id; dues[#ids] = now; reclaim[#ids] = true
end
if #ids < limit then
  -- no WITHSCORES (Redis writes each score with snprintf): a fresh entry is
  -- due at the execute_at its id holds (add.lua), the others' scores are
  -- read one by one (retries and tasks held back: few in a batch).
  -- Oldest first; with far_limit, those due at or after now + near_ms are
  -- taken after every one due sooner, and at most far_limit of them.
  local reach = '(' .. int_text(now + tonumber(ARGV[1]))
  local far = tonumber(ARGV[5])
  local due
  if far then
    local near = now + tonumber(ARGV[4])
    due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. int_text(near), 'LIMIT', 0,
                     limit - #ids)
    local more = math.min(far, limit - #ids - #due)
    if more > 0 then
      for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], int_text(near), reach, 'LIMIT', 0,
                                    more)) do
        due[#due + 1] = m
      end
    end
  else
    due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', reach, 'LIMIT', 0, limit - #ids)
  end
  for i = 1, #due do
    -- a fresh task (lib.lua): "id\nrecord" (plain finds: a pattern walks
    -- the record a byte at a time)
    local m, id, rec, at = due[i], due[i], nil, nil
    local nl = string.find(m, '\n', 1, true)
    if nl then
      id, rec = string.sub(m, 1, nl - 1), string.sub(m, nl + 1)
      at = id_at_text(id)
    end
    ids[#ids + 1] = id; reclaim[#ids] = false
    -- (a fresh one's due as a number only when needed: below)
    if not at then
      at = redis.call('ZSCORE', KEYS[1], m)
      dues[#ids] = tonumber(at)
    end
    due_text[#ids] = at
    recs[#ids] = rec
    if rec then member[#ids] = m end
    taken_due[#taken_due + 1] = m
  end
end
local taken = #ids

-- cancellations are rare: most slices have an empty :del and skip this
local deleted = {}
if taken > 0 and redis.call('SCARD', KEYS[3]) > 0 then
  for i = 1, taken do deleted[i] = redis.call('SISMEMBER', KEYS[3], ids[i]) == 1 end
end
local ptr = {}
if taken > 0 and redis.call('HLEN', KEYS[5]) > 0 then ptr = bulk_read('HMGET', KEYS[5], ids) end
-- one HMGET: each task's state, then a full task's spec (a fresh one holds
-- its record in its member)
local fields, sfield = {}, {}
for i = 1, taken do
  sfield[i] = 's:' .. ids[i]
  fields[#fields + 1] = sfield[i]
  if not recs[i] then fields[#fields + 1] = ids[i] end
end
local got = bulk_read('HMGET', KEYS[2], fields)
local states, specs, fresh = {}, {}, {}
local j = 1
for i = 1, taken do
  states[i] = got[j]
  j = j + 1
  if not recs[i] then
    specs[i] = got[j]
    j = j + 1
  elseif not states[i] then
    -- (a state already there: a task of the same id was stored in full
    -- since, a key given that tickd once made; that one stands)
    specs[i], fresh[i] = recs[i], true
  end
end

local srem, zrem, zadd, hset, seen = {}, {}, {}, {}, {}
local dropped = 0
-- what a burst repeats, made once a call: a timeout's number, a queue's
-- JSON, a lease deadline's digits
local to_num, q_json, deadline_text = {}, {}, {}
for i = 1, taken do
  local id = ids[i]
  if seen[id] then
    -- an expired lease that was also due: taken once, above
  elseif recs[i] and not fresh[i] then
    -- dropped (its entry is in taken_due): it was counted open when added
    dropped = dropped + 1
  elseif deleted[i] then
    srem[#srem + 1] = id
    zrem[#zrem + 1] = id
  elseif ptr[i] then
    local due = dues[i] or tonumber(due_text[i])
    zadd[#zadd + 1] = math.max(due, now) + tonumber(ptr[i]) + margin
    zadd[#zadd + 1] = id
    out[#out + 1] = due; out[#out + 1] = id; out[#out + 1] = 0; out[#out + 1] = false
  elseif fresh[i] then
    -- its first attempt: the state is written as text (lib.lua: state_run1).
    -- Its due is read as a number only when later than now (digits of the
    -- same length compare as numbers do).
    local to, q = rec_to_queue(recs[i])
    local at = due_text[i]
    local from = now
    if #at ~= #now_text or at > now_text then from = tonumber(at) end
    local ton = to_num[to]
    if not ton then ton = tonumber(to); to_num[to] = ton end
    local qj = q_json[q or '']
    if not qj then qj = state_run1_queue(q); q_json[q or ''] = qj end
    local dl = from + ton + margin
    local dlt = deadline_text[dl]
    if not dlt then dlt = int_text(dl); deadline_text[dl] = dlt end
    hset[#hset + 1] = sfield[i]
    hset[#hset + 1] = state_run1(at, to, qj)
    hset[#hset + 1] = id
    hset[#hset + 1] = recs[i]
    zadd[#zadd + 1] = dlt
    zadd[#zadd + 1] = id
    out[#out + 1] = member[i]
  else
    local st = states[i]
    if type(st) == 'string' then st = cjson.decode(st) end
    -- an entry here while the task's entry is elsewhere (st.cur: moved) is stale
    if not st or st.cur or not (st.s == 'scheduled' or (reclaim[i] and st.s == 'running')) then
      zrem[#zrem + 1] = id
    else
      -- a task a limit held back (st.w) is due when its entry says: when
      -- it comes round, or when a pump let it go; its due is long past
      local due = st.w and dues[i] or st.due
      st.s = 'running'
      st.w = nil
      hset[#hset + 1] = sfield[i]
      hset[#hset + 1] = cjson.encode(st)
      zadd[#zadd + 1] = int_text(math.max(due, now) + st.to + margin)
      zadd[#zadd + 1] = id
      out[#out + 1] = due; out[#out + 1] = id; out[#out + 1] = st.a + 1
      out[#out + 1] = specs[i]
    end
  end
  seen[id] = true
end
-- Writes that add come before those that remove: a script that fails midway
-- (a write refused) keeps what it did, and so must never have removed an
-- entry without writing the one that replaces it.
bulk_write('HSET', KEYS[2], hset)
if dropped > 0 then redis.call('HINCRBY', KEYS[2], '#open', -dropped) end
bulk_write('ZADD', KEYS[4], zadd)
bulk_write('ZREM', KEYS[1], taken_due)
bulk_write('SREM', KEYS[3], srem)
bulk_write('ZREM', KEYS[4], zrem)
out[1] = redis.call('ZCARD', KEYS[1])
out[2] = redis.call('ZCARD', KEYS[4])
out[3] = taken
return out

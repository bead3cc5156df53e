-- sched: every operation on the schedules of one bucket (src/store/store.h documents
-- the state JSON; lib.lua the keys).
-- KEYS: sdef, snext, sall. ARGV[1]: the operation, then its arguments:
--   create id def next | replace id def next | pause id | resume id next |
--   delete id          -> {status, def, state, prev}
--   get id             -> {status, def, state}
--   list after limit   -> {id, def, state, ...}
--   claim until limit lease_ms keep_ms -> {id, def, state, ...}
--   advance id ct v made skipped last_at last_id next fut_json
--                      -> {status, def, state}
-- status: ok | exists | conflict | notfound. Times are ms; next -1 = none.
local op, id = ARGV[1], ARGV[2]

local function load(sid)
  local r = redis.call('HMGET', KEYS[1], sid, 's:' .. sid)
  if not r[1] or not r[2] then return nil, nil end
  return r[1], cjson.decode(r[2])
end

local function store(sid, def, st)
  if not st.fut or #st.fut == 0 then st.fut = nil end -- cjson writes {} for []
  local s = json_exact(st)
  redis.call('HSET', KEYS[1], sid, def, 's:' .. sid, s)
  if st.st == 'active' and st.next >= 0 and not st.ct then
    redis.call('ZADD', KEYS[2], st.next, sid)
  elseif not st.ct then
    redis.call('ZREM', KEYS[2], sid)
  end
  return s
end

if op == 'get' then
  local r = redis.call('HMGET', KEYS[1], id, 's:' .. id)
  if not r[1] or not r[2] then return {'notfound'} end
  return {'ok', r[1], r[2]}
end

if op == 'list' then
  local from = ARGV[2] == '' and '-' or ('(' .. ARGV[2])
  local ids = redis.call('ZRANGEBYLEX', KEYS[3], from, '+', 'LIMIT', 0, tonumber(ARGV[3]))
  local out = {}
  for _, sid in ipairs(ids) do
    local r = redis.call('HMGET', KEYS[1], sid, 's:' .. sid)
    if r[1] and r[2] then
      out[#out + 1] = sid; out[#out + 1] = r[1]; out[#out + 1] = r[2]
    end
  end
  return out
end

if op == 'claim' then
  local now = now_ms()
  local lease, keep = tonumber(ARGV[4]), tonumber(ARGV[5])
  local limit = tonumber(ARGV[3])
  -- a leased schedule's score is its lease's end, which may be within reach:
  -- it is passed over until the lease ended
  local ids = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[2], 'LIMIT', 0, 4 * limit)
  local out = {}
  for _, sid in ipairs(ids) do
    local def, st = load(sid)
    if #out >= 3 * limit then break end
    if not st or st.st ~= 'active' then
      redis.call('ZREM', KEYS[2], sid)
    elseif st.ct and st.le and st.le > now then
      -- held by a runner
    else
      -- a lease that expired keeps its clock while the slice it homed runs
      -- in is still open, so the runs it may have made get the same ids
      if not st.ct or now - st.ct > keep then st.ct = now end
      st.le = now + lease
      redis.call('HSET', KEYS[1], 's:' .. sid, json_exact(st))
      redis.call('ZADD', KEYS[2], now + lease, sid)
      out[#out + 1] = sid; out[#out + 1] = def; out[#out + 1] = json_exact(st)
    end
  end
  return out
end

local def, st = load(id)

if op == 'create' then
  if st then return {def == ARGV[3] and 'exists' or 'conflict', def, json_exact(st)} end
  local nxt = tonumber(ARGV[4])
  local s = store(id, ARGV[3], {st = nxt >= 0 and 'active' or 'completed', next = nxt,
                                runs = 0, skipped = 0, v = 1})
  redis.call('ZADD', KEYS[3], 0, id)
  return {'ok', ARGV[3], s}
end

if not st then return {'notfound'} end
local prev = json_exact(st)

if op == 'advance' then
  if st.ct ~= tonumber(ARGV[3]) then return {'conflict', def, prev} end
  st.ct = nil
  st.le = nil
  local made = tonumber(ARGV[5])
  st.runs = st.runs + made
  st.skipped = (st.skipped or 0) + tonumber(ARGV[6])
  if made > 0 then
    st.last = tonumber(ARGV[7]); st.lid = ARGV[8]
  end
  -- runs made ahead and not yet due: earlier passes' that are still ahead,
  -- and this one's (a run's id holds its time: <slice>.<ms>.<key>)
  local now, fut = now_ms(), {}
  for _, f in ipairs(st.fut or {}) do
    local at = tonumber(string.match(f, '^[^.]*%.[^.]*%.(%d+)%.'))
    if at and at > now then fut[#fut + 1] = f end
  end
  for _, f in ipairs(cjson.decode(ARGV[10])) do fut[#fut + 1] = f end
  st.fut = fut
  -- a PUT since the claim set its own next
  if st.v == tonumber(ARGV[4]) then
    st.next = tonumber(ARGV[9])
    if st.next < 0 and st.st == 'active' then st.st = 'completed' end
  end
  return {'ok', def, store(id, def, st), prev}
end

if op == 'delete' then
  redis.call('HDEL', KEYS[1], id, 's:' .. id)
  redis.call('ZREM', KEYS[2], id)
  redis.call('ZREM', KEYS[3], id)
  return {'ok', def, prev, prev}
end

if op == 'replace' then
  def = ARGV[3]
  st.next = tonumber(ARGV[4])
  st.fut = nil
  if st.st ~= 'paused' then st.st = st.next >= 0 and 'active' or 'completed' end
elseif op == 'pause' then
  if st.st == 'completed' then return {'conflict', def, prev, prev} end
  st.st = 'paused'
  st.fut = nil
elseif op == 'resume' then
  if st.st == 'completed' then return {'conflict', def, prev, prev} end
  if st.st ~= 'paused' then return {'ok', def, prev, prev} end
  st.next = tonumber(ARGV[3])
  st.st = st.next >= 0 and 'active' or 'completed'
end
-- a runner holding the schedule (ct) records its pass, but keeps this next
st.v = st.v + 1
return {'ok', def, store(id, def, st), prev}

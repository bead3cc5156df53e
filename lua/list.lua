-- list: one slice's tasks of one status, for GET /v1/tasks, in the order
-- (score, id): scheduled from :due (the time due; ids in :del are cancelled),
-- running from :run (the lease's end), succeeded / failed / cancelled from
-- their index (when they ended). Retries and moves waiting here are listed
-- here (their ids name their home). The succeeded index holds a member a
-- settle, the ids it ended with '\n' between (settle.lua; a member of one id
-- is one an older build wrote): its order is (score, the members' order,
-- the ids' order in each), and the ids of one score are read whole, then a
-- cursor's resume after its id.
-- KEYS: due, run, ok, failed, cancelled, del, task, expired. ARGV: status, order (asc |
-- desc), after_score, after_id ('' = from the start), limit, from_ms, to_ms
-- (execute_at bounds, -1 = none), key_prefix, runs ('1': the key is
-- key_prefix and digits alone, a schedule's runs)
-- Returns {gone, more, last_score, last_id, id, score, id, score, ...}: gone
-- = 1 when the slice holds nothing at all any more (its keys expired); more =
-- 1 when the call stopped after SCAN_MAX entries that the filters refused,
-- to go on after (last_score, last_id): Redis is never held for long.
local SCAN_MAX = 20000
local ix = ({scheduled = 1, running = 2, succeeded = 3, failed = 4, cancelled = 5,
             expired = 8})[ARGV[1]]
local desc = ARGV[2] == 'desc'
local after_score, after_id = ARGV[3], ARGV[4]
local limit = tonumber(ARGV[5])
local from, to, prefix = tonumber(ARGV[6]), tonumber(ARGV[7]), ARGV[8]
local runs = ARGV[9] == '1'
local key = KEYS[ix]
local out = {0, 0, '', ''}
local HEAD = 4
if redis.call('EXISTS', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[7], KEYS[8]) == 0 then
  out[1] = 1
  return out
end
local check_del = ix == 1 and redis.call('SCARD', KEYS[6]) > 0
-- the succeeded index is read from the cursor's score on (its run read
-- whole, then the ids up to the cursor's skipped)
local lo, hi = '-inf', '+inf'
if after_id ~= '' then
  if desc then hi = after_score else lo = after_score end
end
-- an entry of the slice past the cursor, in order
local scanned = 0
local function visit(id, score)
  scanned = scanned + 1
  if #out - HEAD < 2 * limit then
    local at, k = id_at(id)
    if (from < 0 or (at and at >= from)) and (to < 0 or (at and at < to)) and
       string.sub(k, 1, #prefix) == prefix and
       (not runs or string.find(k, '^%d+$', #prefix + 1)) and
       not (check_del and redis.call('SISMEMBER', KEYS[6], id) == 1) then
      out[#out + 1] = id
      out[#out + 1] = score
    end
    out[3], out[4] = score, id
  end
end

-- the succeeded index: the ids of one score (run_score), in order, and how
-- many members of that score were read
local batched = ix == 3
local run, run_score, run_members = {}, nil, 0
local function flush()
  local from_i = 1
  if after_id ~= '' and run_score and tonumber(run_score) == tonumber(after_score) then
    for i = 1, #run do
      if run[i] == after_id then from_i = i + 1; break end
    end
  end
  for i = from_i, #run do visit(run[i], run_score) end
  run = {}
end

local function budget_spent()
  if scanned < SCAN_MAX or #out - HEAD >= 2 * limit then return false end
  out[2] = 1
  return true
end

if batched then
  -- (a member holds up to a settle's ids: fewer a read). SCAN_MAX is
  -- checked between runs of one score: the cursor may land in one. Each
  -- read starts at the run the last ended in, not at an offset Redis walks
  -- entry by entry (members of one id, a settle that ended one task, are
  -- many)
  local batch, offset = 8, 0
  while #out - HEAD < 2 * limit do
    local r
    if desc then
      r = redis.call('ZREVRANGEBYSCORE', key, hi, lo, 'WITHSCORES', 'LIMIT', offset, batch)
    else
      r = redis.call('ZRANGEBYSCORE', key, lo, hi, 'WITHSCORES', 'LIMIT', offset, batch)
    end
    local stop = false
    for i = 1, #r, 2 do
      local m, score = r[i], r[i + 1]
      if score ~= run_score then
        flush()
        if budget_spent() then stop = true; break end
        run_score, run_members = score, 0
      end
      run_members = run_members + 1
      if not string.find(m, '\n', 1, true) then
        run[#run + 1] = m
      else
        local ids = {}
        for id in string.gmatch(m, '[^\n]+') do ids[#ids + 1] = id end
        for j = 1, #ids do run[#run + 1] = ids[desc and #ids + 1 - j or j] end
      end
    end
    if stop then break end
    if #r < 2 * batch then
      flush()
      break
    end
    if desc then hi = run_score else lo = run_score end
    offset = run_members
  end
  return out
end

-- The other indexes, an entry an id (or "id\nrecord": a fresh task in :due,
-- lib.lua; '\n' sorts before any id character, so ids keep the members'
-- order), are read by rank from the first entry past the cursor. That one is
-- found by halving the entries of the cursor's score: a page that ends
-- inside many entries of one score (a burst's tasks, due at one instant)
-- costs the next a few reads, where reading them one by one could spend
-- the whole SCAN_MAX before the cursor, and the walk started over.
local function member_id(m) return string.match(m, '^[^\n]*') end
local function at_rank(i)
  return (desc and redis.call('ZREVRANGE', key, i, i) or redis.call('ZRANGE', key, i, i))[1]
end
local rank = 0
if after_id ~= '' then
  local l = desc and redis.call('ZCOUNT', key, '(' .. after_score, '+inf') or
            redis.call('ZCOUNT', key, '-inf', '(' .. after_score)
  local h = l + redis.call('ZCOUNT', key, after_score, after_score)
  while l < h do
    local mid = math.floor((l + h) / 2)
    local id = member_id(at_rank(mid))
    if (desc and bytes_lt(id, after_id)) or (not desc and bytes_lt(after_id, id)) then
      h = mid
    else
      l = mid + 1
    end
  end
  rank = l
end
local batch = 256
while #out - HEAD < 2 * limit do
  local r
  if desc then
    r = redis.call('ZREVRANGE', key, rank, rank + batch - 1, 'WITHSCORES')
  else
    r = redis.call('ZRANGE', key, rank, rank + batch - 1, 'WITHSCORES')
  end
  rank = rank + #r / 2
  for i = 1, #r, 2 do
    -- (the lease index's pin is no task: lib.lua)
    if r[i] ~= RUN_PIN then visit(member_id(r[i]), r[i + 1]) end
  end
  if #r < 2 * batch or budget_spent() then break end
end
return out

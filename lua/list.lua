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
-- from the cursor on; entries of the cursor's score up to its id are skipped
local lo, hi = '-inf', '+inf'
if after_id ~= '' then
  if desc then hi = after_score else lo = after_score end
end
-- an entry of the slice, in order; past: after the cursor
local scanned = 0
local function visit(id, score, past)
  scanned = scanned + 1
  if past and #out - HEAD < 2 * limit then
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
  for i = from_i, #run do visit(run[i], run_score, true) end
  run = {}
end

-- (a succeeded member holds up to a settle's ids: fewer a read). SCAN_MAX
-- is checked between runs of one score there: the cursor may land in one.
local batch, offset = batched and 8 or 256, 0
local function budget_spent()
  if scanned < SCAN_MAX or #out - HEAD >= 2 * limit then return false end
  out[2] = 1
  return true
end
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
    if batched then
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
    elseif m ~= RUN_PIN then
      -- (the lease index's pin is no task: lib.lua) a fresh task's member
      -- is "id\nrecord" (lib.lua); '\n' sorts before any id character, so
      -- ids keep the members' order
      local id = string.match(m, '^[^\n]*')
      visit(id, score, after_id == '' or tonumber(score) ~= tonumber(after_score) or
                       (desc and bytes_lt(id, after_id)) or (not desc and bytes_lt(after_id, id)))
    end
  end
  if stop then break end
  if #r < 2 * batch then
    flush()
    break
  end
  if batched then
    -- the next read starts at the run the last ended in, not at an offset
    -- from the cursor: Redis walks an offset entry by entry, and members of
    -- one id (a settle that ended one task) are many
    if desc then hi = run_score else lo = run_score end
    offset = run_members
  else
    offset = offset + #r / 2
    if budget_spent() then break end
  end
end
return out

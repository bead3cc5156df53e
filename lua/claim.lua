-- claim: lease what is due in one slice. Takes expired leases first (their
-- holder died), then ids due before now + reach_ms, oldest first, at most
-- `limit` in all, of which at most `far_limit` due at or after now + near_ms
-- (the room's last places are kept for tasks due soon); each moves to :run
-- with a lease deadline.
-- KEYS: due, task, del, run, ptr. ARGV: reach_ms (how far ahead of now), limit,
-- lease_margin_ms, near_ms, far_limit, counts ('1': due_left and run_left
-- wanted; else both are -1, not counted)
-- Returns {due_left, run_left, taken, then per task leased either its :due
-- member "id\nrecord" (a fresh task, lib.lua: its first attempt, due at the
-- execute_at its id holds) or due_ms, id, attempt, spec}: due_ms an integer,
-- the member a string, so each tells its form; spec (the task's record, or
-- its spec as schema 1 stored it) is nil for a retry pointer (read it from
-- the home slice with fetch); `taken` counts every id consumed, delivered
-- or dropped, so taken == limit means there may be more.
-- Reads and writes go in bulk (one HMGET, HSET, ZADD... for the whole call),
-- not one command per id; every read and check comes before the first write
-- but one: the fresh tasks' records (below), which changes nothing a read
-- here needs, and which a record with no state left by an error after it
-- cannot fool (the next claim reads the states then). A command costs Redis
-- about as much as a hundred ids it carries, whatever its size: what most
-- claims find empty (:del, :ptr) is asked once for both, and the counts only
-- when wanted.

-- a slice with nothing due and nothing leased (most of a tick's claims:
-- buckets with no task this minute, the next minute's slice when the reach
-- crosses into it) is answered at once
if redis.call('EXISTS', KEYS[1], KEYS[4]) == 0 then return {0, 0, 0} end
local now = now_ms()
local limit = tonumber(ARGV[2])
local margin = tonumber(ARGV[3])
local out = {0, 0, 0}

-- candidates, in order: expired leases, then due ids
-- (a table grown in a loop by a count kept beside it: each #t is a search)
local ids, dues, reclaim, recs, due_text, member = {}, {}, {}, {}, {}, {}
-- the fresh tasks' ids and records, for their HSET (below); how many of
-- :due's entries were read
local frec, nfr, ndue = {}, 0, 0
local exp = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, limit)
for i, id in ipairs(exp) do
  ids[i] = id; dues[i] = now; reclaim[i] = true
end
local taken = #ids
if taken < limit then
  -- no WITHSCORES (Redis writes each score with snprintf): a fresh entry is
  -- due at the execute_at its id holds (add.lua), the others' scores are
  -- read one by one (retries and tasks held back: few in a batch).
  -- Oldest first: those due at or after now + near_ms are taken after every
  -- one due sooner, and at most far_limit of them.
  local reach = '(' .. int_text(now + tonumber(ARGV[1]))
  local near = now + tonumber(ARGV[4])
  local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. int_text(near), 'LIMIT', 0,
                         limit - #ids)
  local more = math.min(tonumber(ARGV[5]), limit - #ids - #due)
  if more > 0 then
    for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], int_text(near), reach, 'LIMIT', 0,
                                  more)) do
      due[#due + 1] = m
    end
  end
  -- a fresh member's id is "<this slice>.<execute_at>.<key>" (add.lua
  -- writes it to its home slice only): its execute_at's 13 digits (every
  -- time from 2001 to 2286) are read at a known place, any other by
  -- id_at_text
  local at_from = #str_match(KEYS[1], '{([^}]*)}') + 2
  local at_dot = at_from + 13
  -- (the last text checked and whether it was digits: a run of tasks due on
  -- the same ms checks it once; a table of every one would grow in a
  -- backlog, where each task has its own. Once two in a row had it, the next
  -- ones are matched against it with its dot, one plain find where reading
  -- it takes two calls: digits_dot, dropped at the next due that differs)
  local digits_at, digits_ok, digits_dot
  for i = 1, #due do
    -- a fresh task (lib.lua): "id\nrecord" (plain finds: a pattern walks
    -- the record a byte at a time)
    local m, id, rec, at = due[i], due[i], nil, nil
    local nl = str_find(m, '\n', 1, true)
    if nl then
      id, rec = str_sub(m, 1, nl - 1), str_sub(m, nl + 1)
      if digits_dot and str_find(id, digits_dot, at_from, true) == at_from then
        at = digits_at
      elseif str_byte(id, at_dot) == 46 then
        at = str_sub(id, at_from, at_dot - 1)
        if at ~= digits_at then
          digits_at, digits_ok, digits_dot = at, str_find(at, '^%d+$') ~= nil, nil
        elseif digits_ok then
          digits_dot = at .. '.'
        end
        if not digits_ok then at = nil end
      else
        at = id_at_text(id)
      end
    end
    taken = taken + 1
    ids[taken] = id
    -- (a fresh one's due as a number only when needed: below)
    if not at then
      at = redis.call('ZSCORE', KEYS[1], m)
      dues[taken] = tonumber(at)
    end
    due_text[taken] = at
    if rec then
      recs[taken], member[taken] = rec, m
      nfr = nfr + 1; frec[nfr] = id
      nfr = nfr + 1; frec[nfr] = rec
    end
  end
  -- every entry read is taken (delivered or dropped)
  ndue = #due
end

-- cancellations and retry pointers are rare: most slices have neither
local deleted, ptr = {}, {}
if taken > 0 and redis.call('EXISTS', KEYS[3], KEYS[5]) > 0 then
  if redis.call('SCARD', KEYS[3]) > 0 then
    for i = 1, taken do deleted[i] = redis.call('SISMEMBER', KEYS[3], ids[i]) == 1 end
  end
  if redis.call('HLEN', KEYS[5]) > 0 then ptr = bulk_read('HMGET', KEYS[5], ids) end
end
-- A fresh task's record goes to the task hash first, all in one HSET, which
-- answers how many fields it added. Every other writer of a state writes
-- the record with it (add.lua, task_state) or changes a state that has one,
-- and nothing removes a record alone; so a record new to the hash is a task
-- with no state, claimed for its first attempt (a fresh member is never in
-- :del or :ptr, nor an expired lease, unless its task has a state). A record
-- not new is a fresh member this claim must not take: one an add's first
-- run put back, run by Redis after the run sent again for it (rcluster
-- sends the same bytes: the record written here is the one there), once the
-- task was claimed. Only then are the fresh tasks' states read (below).
local all_new = nfr == 0 or bulk_write('HSET', KEYS[2], frec) == nfr / 2
-- one HMGET: the state and spec of each task that is not fresh (and each
-- fresh one's state, when not all records were new)
local fields, sfield, nf = {}, {}, 0
for i = 1, taken do
  local f = 's:' .. ids[i]
  sfield[i] = f
  if not recs[i] then
    nf = nf + 1; fields[nf] = f
    nf = nf + 1; fields[nf] = ids[i]
  elseif not all_new then
    nf = nf + 1; fields[nf] = f
  end
end
local got = bulk_read('HMGET', KEYS[2], fields)
local states, specs, fresh = {}, {}, {}
local j = 1
for i = 1, taken do
  if not recs[i] then
    states[i], specs[i] = got[j], got[j + 1]
    j = j + 2
  elseif all_new then
    fresh[i] = true
  else
    states[i] = got[j]
    j = j + 1
    -- (a state already there: that task stands)
    fresh[i] = not states[i]
  end
end

-- (the pins first, in the same HSET and ZADD as the tasks: lib.lua)
local srem, zrem, zadd, hset, seen = {}, {}, {'+inf', RUN_PIN}, {TASK_PIN_FIELD, TASK_PIN}, {}
local dropped, nh, nz, no = 0, 2, 2, 3
-- an id is taken twice only when it is an expired lease too (:due's members
-- are unique, and a fresh member with a plain entry's id is dropped)
local check_seen = #exp > 0
-- what a burst repeats, made once a call: a timeout's number, a queue's
-- JSON (tables: few of each); and once for a run of tasks with the same due
-- (the last one made): the due's number, a lease deadline's digits, the
-- running state's text
local to_num, q_json = {}, {}
local from_at, from, dl_num, dlt
local run1_at, run1_to, run1_qj, run1_text
-- A burst's records mostly begin alike: the same url, method, timeout and
-- queue. A record that begins with the last one read's first four parts
-- (rec_head: its bytes through the queue's line) takes its timeout and queue,
-- found by one plain find where reading them takes two calls of the string
-- library. After a record that did not, the next HEAD_WAIT are read without
-- a try, so that records that differ there (a url each) pay a failed find
-- only once in that many.
local HEAD_WAIT = 32
local rec_head, head_to, head_q, head_wait = nil, nil, nil, 0
for i = 1, taken do
  local id = ids[i]
  if recs[i] and not fresh[i] then
    -- dropped (its entry is among the ndue taken): it was counted open when added
    -- (first: its id may also be an entry's taken in this call)
    dropped = dropped + 1
  elseif check_seen and seen[id] then
    -- an expired lease that was also due: taken once, above
  elseif deleted[i] then
    srem[#srem + 1] = id
    zrem[#zrem + 1] = id
  elseif ptr[i] then
    local due = dues[i] or tonumber(due_text[i])
    nz = nz + 1; zadd[nz] = math.max(due, now) + tonumber(ptr[i]) + margin
    nz = nz + 1; zadd[nz] = id
    out[no + 1], out[no + 2], out[no + 3], out[no + 4] = due, id, 0, false
    no = no + 4
  elseif fresh[i] then
    -- its first attempt: the state is written as text (lib.lua: state_run1).
    -- (Its due compared as a number: Lua compares strings with strcoll, in
    -- the locale Redis was started in.)
    local rec, to, q = recs[i], nil, nil
    if rec_head and str_find(rec, rec_head, 1, true) == 1 then
      to, q = head_to, head_q
    else
      if rec_head then rec_head, head_wait = nil, HEAD_WAIT end
      if head_wait > 0 then
        head_wait = head_wait - 1
        to, q = rec_to_queue(rec)
      else
        local e
        to, q, e = rec_to_queue(rec, true)
        if e then rec_head, head_to, head_q = str_sub(rec, 1, e - 1), to, q end
      end
    end
    local at = due_text[i]
    if at ~= from_at then from_at, from = at, math.max(tonumber(at), now) end
    local ton = to_num[to]
    if not ton then ton = tonumber(to); to_num[to] = ton end
    local qj = q_json[q or '']
    if not qj then qj = state_run1_queue(q); q_json[q or ''] = qj end
    local dl = from + ton + margin
    if dl ~= dl_num then dl_num, dlt = dl, int_text(dl) end
    -- (tasks due on the same ms share their state's text)
    if at ~= run1_at or to ~= run1_to or qj ~= run1_qj then
      run1_at, run1_to, run1_qj, run1_text = at, to, qj, state_run1(at, to, qj)
    end
    nh = nh + 1; hset[nh] = sfield[i]
    nh = nh + 1; hset[nh] = run1_text
    nz = nz + 1; zadd[nz] = dlt
    nz = nz + 1; zadd[nz] = id
    no = no + 1; out[no] = member[i]
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
      nh = nh + 1; hset[nh] = sfield[i]
      nh = nh + 1; hset[nh] = cjson.encode(st)
      nz = nz + 1; zadd[nz] = int_text(math.max(due, now) + st.to + margin)
      nz = nz + 1; zadd[nz] = id
      out[no + 1], out[no + 2], out[no + 3], out[no + 4] = due, id, st.a + 1, specs[i]
      no = no + 4
    end
  end
  if check_seen then seen[id] = true end
end
-- Writes that add come before those that remove: a script that fails midway
-- (a write refused) keeps what it did, and so must never have removed an
-- entry without writing the one that replaces it.
if nh > 2 then bulk_write('HSET', KEYS[2], hset) end
if dropped > 0 then redis.call('HINCRBY', KEYS[2], '#open', -dropped) end
if nz > 2 then bulk_write('ZADD', KEYS[4], zadd) end
-- (the entries read are :due's first: its ranks from 0, the far ones read
-- only when every near one was; one range, not a ZREM of each member, which
-- Redis would hash and look for one by one)
if ndue > 0 then redis.call('ZREMRANGEBYRANK', KEYS[1], 0, ndue - 1) end
bulk_write('SREM', KEYS[3], srem)
bulk_write('ZREM', KEYS[4], zrem)
-- (the unpin drops the pin with the last lease, counts wanted or not)
local run_left = #zrem > 0 and run_unpin(KEYS[4])
if ARGV[6] == '1' then
  out[1], out[2] = redis.call('ZCARD', KEYS[1]), run_left or run_count(KEYS[4])
else
  out[1], out[2] = -1, -1
end
out[3] = taken
return out

-- settle: record the outcomes of attempts of tasks homed in this slice.
-- KEYS: due, task, del, run, ok, failed, cancelled, expired (home slice)
-- ARGV: retention_ms, failed_retention_ms, token (this settle's, the same
--       when it is sent again), then per task a group in one of two forms:
--   general (12): id, outcome (ok|fail|retry|release|park|expire), attempt,
--       status_code, error, next_due_ms, local (1 when the lease is in this
--       slice), next_slice (retry: the slice holding the retry pointer, '' =
--       here), and the attempt's history entry: sent_at_ms (0: none), took_ms,
--       the answer's status (0: none) and the start of a failed answer's body
--   success (2): id, '{"t":sent_at_ms,"ms":took_ms,"c":status}' (decimal):
--       a first attempt that succeeded, with no error and no body, its lease
--       in this slice, as the history entry it adds. The same as the general
--       group id, 'ok', 1, '', '', 0, 1, '', sent_at_ms, took_ms, status, ''
--       (what is stored does not depend on the form); told apart by its
--       second argument, which is not an outcome's name.
-- The task keeps its last HISTORY attempts in st.h: {t, ms, c, e, b}.
-- Returns, for the tasks this settle ended (succeeded or failed; also when
-- this settle is sent again after its answer was lost: st.ft), each queue
-- once with how many of them it counted: {queue, n, queue, n, ...}.
-- States are read with one HMGET and written with one HSET; an id given
-- twice sees its first outcome, as if the groups had come one call each.
local HISTORY = 10
local OUTCOMES = {ok = true, fail = true, retry = true, release = true, park = true,
                  expire = true}
local retention, failed_retention, token = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local now = now_ms()
local now_text = int_text(now)

-- the groups: where each starts, and its state's field
local argv = ARGV
local starts, sfields, ngroups = {}, {}, 0
local nargv = #argv
local g = 4
while g <= nargv do
  ngroups = ngroups + 1
  starts[ngroups] = g
  sfields[ngroups] = 's:' .. argv[g]
  if OUTCOMES[argv[g + 1]] then g = g + 12 else g = g + 2 end
end
local raw = bulk_read('HMGET', KEYS[2], sfields)
local states, changed, order, ofields = {}, {}, {}, {}
local zrem, zadd, finals = {}, {}, 0
local counted, ended = {}, ''
local fin_ok, fin_failed, fin_expired = {}, {}, {}

-- due again at next_due: here, or in next_slice (its pointer written there)
local function requeue(st, id, next_due, next_slice)
  st.s = 'scheduled'
  if next_slice == '' then
    st.cur = nil
    zadd[#zadd + 1] = next_due; zadd[#zadd + 1] = id
  else
    st.cur = next_slice
  end
end

-- the task ended in this settle: its id goes to ix, the ids of its slice's
-- ok, failed or expired index (written at the end)
local function ended_now(id, ix)
  finals = finals + 1
  ix[#ix + 1] = id
end

-- its state (group n's) is written at the end, once
local function write_back(id, n)
  if not changed[id] then
    changed[id] = true
    order[#order + 1] = id
    ofields[#order] = sfields[n]
  end
end

-- the task ends as status
local function finish(st, id, status, ix)
  st.s = status
  st.fin = now
  st.ft = token
  st.cur = nil
  counted[id] = true
  ended_now(id, ix)
  return state_queue(st) or ''
end

-- A first attempt that succeeded, its state in the form the claim wrote
-- (lib.lua: STATE_RUN1_HEAD, then due, to and q): the succeeded state is
-- written as text too, the claim's due, to and q kept as they are, and h, the
-- attempt's history entry (JSON text), added. A state the same as the one
-- before is not read again (a burst's tasks share their due, timeout and
-- queue). Group n's task (id), given first in this settle, is written
-- back so; returns its queue, or nil when its state is not of that form (the
-- general path then takes it).
local canon_token = string.find(token, '^%w*$') ~= nil
local RUN1_A0 = #'{"s":"running","a":0'
local SUCCEEDED1 = '{"s":"succeeded","a":1'
local fin_h = ',"fin":' .. now_text .. ',"ft":"' .. token .. '","h":['
-- the last state read: its queue (nil: not of the claim's form) and the
-- text after RUN1_A0 without its "}"
local last_raw, last_queue, last_mid
local hset, nhset = {}, 0
local function settled_ok1(n, id, h)
  local rawst = raw[n]
  if not canon_token or states[id] ~= nil or not rawst then return nil end
  if rawst ~= last_raw then
    last_raw, last_queue = rawst, nil
    if str_find(rawst, STATE_RUN1_HEAD, 1, true) == 1 then
      local q = str_match(rawst, STATE_RUN1_Q, #STATE_RUN1_HEAD + 1)
      if q then
        last_queue = q == '1' and 'default' or str_match(q, '^"([%w._-]+)"$') or cjson.decode(q)
        last_mid = str_sub(rawst, RUN1_A0 + 1, -2)
      end
    end
  end
  if not last_queue then return nil end
  local text = SUCCEEDED1 .. last_mid .. fin_h .. h .. ']}'
  -- (not in counted: a group of the same id after this one finds the text
  -- in states, which says so)
  states[id] = text
  ended_now(id, fin_ok)
  nhset = nhset + 1; hset[nhset] = sfields[n]
  nhset = nhset + 1; hset[nhset] = text
  return last_queue
end

-- A success's history entry, as settled_ok1 takes it: nil unless sent_at
-- and status are digits without a leading zero, took the same or 0.
local function ok1_entry(t, ms, c)
  if not str_find(t .. ' ' .. ms .. ' ' .. c, '^[1-9]%d* %d+ [1-9]%d*$') or
     (#ms > 1 and str_byte(ms) == 48) then
    return nil
  end
  return '{"t":' .. t .. ',"ms":' .. ms .. ',"c":' .. c .. '}'
end

local function settle(n, id, o, attempt, code, err, next_due, loc, next_slice, hist)
  local st = states[id]
  -- ended by settled_ok1 earlier in this settle, and counted there
  local ended_ok1 = type(st) == 'string'
  if loc == '1' then zrem[#zrem + 1] = id end
  if st == nil and o == 'ok' and attempt == '1' and err == '' and code == '' and hist[4] == '' then
    local h = ok1_entry(hist[1], hist[2], hist[3])
    local queue = h and settled_ok1(n, id, h)
    if queue then return queue end
  end
  if type(st) == 'string' then
    -- given again in this settle, after the first took the path above: that
    -- one ended it, so nothing below changes it, and its text is kept
    st = cjson.decode(st)
  end
  if st == nil then
    st = raw[n] and cjson.decode(raw[n]) or false
    states[id] = st
  end
  if not st then return '' end
  -- not running: a duplicate delivery after a crash settled it already (or
  -- this very settle, whose answer was lost: st.ft)
  if st.s ~= 'running' then
    if st.ft == token and not counted[id] and not ended_ok1 then
      counted[id] = true
      return state_queue(st) or ''
    end
    return ''
  end
  if o == 'release' then
    st.s = 'scheduled'
    if loc == '1' then zadd[#zadd + 1] = st.due; zadd[#zadd + 1] = id end
  elseif o == 'park' then
    -- held back by a limit (flow.lua): no attempt made; the entry comes back
    -- at next_due unless a pump lets it go sooner; st.due stays its due
    st.w = err
    requeue(st, id, next_due, next_slice)
  else
    st.a = tonumber(attempt)
    if hist[1] ~= '0' then
      local e = {t = tonumber(hist[1]), ms = tonumber(hist[2])}
      if hist[3] ~= '0' then e.c = tonumber(hist[3]) end
      if err ~= '' then e.e = err end
      if hist[4] ~= '' then e.b = hist[4] end
      st.h = st.h or {}
      st.h[#st.h + 1] = e
      while #st.h > HISTORY do table.remove(st.h, 1) end
    end
    if code ~= '' then st.code = tonumber(code) end
    if err ~= '' then st.err = err end
    if o == 'retry' then
      st.due = tonumber(next_due)
      requeue(st, id, next_due, next_slice)
    elseif o == 'expire' then
      -- its expires_at passed before an attempt could begin (the one made
      -- before it, if any, is the history's last)
      ended = finish(st, id, 'expired', fin_expired)
    else
      if o == 'ok' then ended = finish(st, id, 'succeeded', fin_ok)
      else ended = finish(st, id, 'failed', fin_failed) end
    end
  end
  write_back(id, n)
  return ended
end

-- A group of the success form (n, its id and history entry). The common
-- case (its state as the claim wrote it) is written without a table; any
-- other goes the general way.
local function settle_success(n, id, h)
  local queue = settled_ok1(n, id, h)
  if queue then
    zrem[#zrem + 1] = id
    return queue
  end
  local t, ms, c = str_match(h, '^{"t":(%d+),"ms":(%d+),"c":(%d+)}$')
  if not t then return redis.error_reply('settle: not a success group: ' .. h) end
  return settle(n, id, 'ok', '1', '', '', '0', '1', '', {t, ms, c, ''})
end

-- the queues whose counts the tasks ended here leave
local qn, qorder = {}, {}
for n = 1, ngroups do
  local i = starts[n]
  ended = ''
  local q
  if OUTCOMES[argv[i + 1]] then
    q = settle(n, argv[i], argv[i + 1], argv[i + 2], argv[i + 3], argv[i + 4], argv[i + 5],
               argv[i + 6], argv[i + 7], {argv[i + 8], argv[i + 9], argv[i + 10], argv[i + 11]})
  else
    q = settle_success(n, argv[i], argv[i + 1])
    if type(q) == 'table' then return q end
  end
  if q ~= '' then
    if not qn[q] then qn[q] = 0; qorder[#qorder + 1] = q end
    qn[q] = qn[q] + 1
  end
end
-- The id goes back to :due and the state is written before the lease ends:
-- a write refused midway leaves the lease, never the task without one.
bulk_write('ZADD', KEYS[1], zadd)
for k, id in ipairs(order) do
  local st = states[id]
  nhset = nhset + 1; hset[nhset] = ofields[k]
  nhset = nhset + 1; hset[nhset] = type(st) == 'string' and st or cjson.encode(st)
end
bulk_write('HSET', KEYS[2], hset)
-- the succeeded index: one member a settle, the ids it ended so with '\n'
-- between, scored when they ended (list.lua). A member an id cost Redis a
-- sixth of the settle (bench/scripts_cg.sh).
if #fin_ok > 0 then redis.call('ZADD', KEYS[5], now_text, table.concat(fin_ok, '\n')) end
-- the failed and the expired (few): a member an id
local function index_each(key, ids)
  local z = {}
  for i, id in ipairs(ids) do z[2 * i - 1] = now_text; z[2 * i] = id end
  bulk_write('ZADD', key, z)
end
index_each(KEYS[6], fin_failed)
index_each(KEYS[8], fin_expired)
if finals > 0 then
  close_slice({KEYS[2], KEYS[3], KEYS[5], KEYS[6], KEYS[7], KEYS[8]}, finals, now, retention,
              failed_retention)
end
bulk_write('ZREM', KEYS[4], zrem)
if #zrem > 0 then run_unpin(KEYS[4]) end
local out = {}
for _, q in ipairs(qorder) do out[#out + 1] = q; out[#out + 1] = qn[q] end
return out

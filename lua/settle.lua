-- settle: record the outcomes of attempts of tasks homed in this slice.
-- KEYS: due, task, del, run, ok, failed, cancelled, expired (home slice)
-- ARGV: retention_ms, failed_retention_ms, token (this settle's, the same
--       when it is sent again), then per task a group of 12: id,
--       outcome (ok|fail|retry|release|park|expire), attempt, status_code, error,
--       next_due_ms, local (1 when the lease is in this slice), next_slice
--       (retry: the slice holding the retry pointer, '' = here), and the
--       attempt's history entry: sent_at_ms (0: none), took_ms, the answer's
--       status (0: none) and the start of a failed answer's body
-- The task keeps its last HISTORY attempts in st.h: {t, ms, c, e, b}.
-- Returns per task, in order, the queue whose count it leaves when this
-- settle ended it (succeeded or failed; also when this settle is sent again
-- after its answer was lost: st.ft), else ''.
-- States are read with one HMGET and written with one HSET; an id given
-- twice sees its first outcome, as if the groups had come one call each.
local HISTORY = 10
local retention, failed_retention, token = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local now = now_ms()
local now_text = int_text(now)
local out = {}

local sfields = {}
for i = 4, #ARGV, 12 do sfields[#sfields + 1] = 's:' .. ARGV[i] end
local raw = bulk_read('HMGET', KEYS[2], sfields)
local states, changed, order = {}, {}, {}
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

-- the task ended in this settle, indexed in ix (its slice's ok, failed or
-- expired)
local function ended_now(id, ix)
  counted[id] = true
  finals = finals + 1
  ix[#ix + 1] = now_text; ix[#ix + 1] = id
end

-- its state is written at the end, once
local function write_back(id)
  if not changed[id] then
    changed[id] = true
    order[#order + 1] = id
  end
end

-- the task ends as status
local function finish(st, id, status, ix)
  st.s = status
  st.fin = now
  st.ft = token
  st.cur = nil
  ended_now(id, ix)
  return state_queue(st) or ''
end

-- A first attempt that succeeded, its state in the form the claim wrote
-- (lib.lua: STATE_RUN1): the succeeded state is written as text too, from
-- the digits given. Returns the state and its queue; nil when any part is
-- not of the forms this expects (the general path then takes it).
local canon_token = string.find(token, '^%w*$') ~= nil
local function settle_ok1(rawst, attempt, code, hist)
  if not canon_token or code ~= '' or hist[4] ~= '' then return nil end
  local due, to, q = string.match(rawst, STATE_RUN1)
  if not due then return nil end
  local ms = string.match(attempt .. ' ' .. hist[1] .. ' ' .. hist[2] .. ' ' .. hist[3],
                          '^[1-9]%d* [1-9]%d* (%d+) [1-9]%d*$')
  if not ms or (#ms > 1 and string.sub(ms, 1, 1) == '0') then return nil end
  local queue
  if q == '1' then queue = 'default'
  else queue = string.match(q, '^"([%w._-]+)"$') or cjson.decode(q) end
  return '{"s":"succeeded","a":' .. attempt .. ',"due":' .. due .. ',"to":' .. to .. ',"q":' .. q ..
         ',"fin":' .. now_text .. ',"ft":"' .. token .. '","h":[{"t":' .. hist[1] .. ',"ms":' ..
         ms .. ',"c":' .. hist[3] .. '}]}', queue
end

local function settle(n, id, o, attempt, code, err, next_due, loc, next_slice, hist)
  local st = states[id]
  if loc == '1' then zrem[#zrem + 1] = id end
  if st == nil and o == 'ok' and err == '' and raw[n] then
    local text, queue = settle_ok1(raw[n], attempt, code, hist)
    if text then
      states[id] = text
      ended_now(id, fin_ok)
      write_back(id)
      return queue
    end
  end
  if type(st) == 'string' then
    -- given again in this settle, after the first took the path above
    st = cjson.decode(st)
    states[id] = st
  end
  if st == nil then
    st = raw[n] and cjson.decode(raw[n]) or false
    states[id] = st
  end
  if not st then return '' end
  -- not running: a duplicate delivery after a crash settled it already (or
  -- this very settle, whose answer was lost: st.ft)
  if st.s ~= 'running' then
    if st.ft == token and not counted[id] then counted[id] = true; return state_queue(st) or '' end
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
  write_back(id)
  return ended
end

for i = 4, #ARGV, 12 do
  ended = ''
  out[#out + 1] = settle((i - 4) / 12 + 1, ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3],
                         ARGV[i + 4], ARGV[i + 5], ARGV[i + 6], ARGV[i + 7],
                         {ARGV[i + 8], ARGV[i + 9], ARGV[i + 10], ARGV[i + 11]})
end
-- The id goes back to :due and the state is written before the lease ends:
-- a write refused midway leaves the lease, never the task without one.
bulk_write('ZADD', KEYS[1], zadd)
local hset = {}
for _, id in ipairs(order) do
  hset[#hset + 1] = 's:' .. id
  local st = states[id]
  hset[#hset + 1] = type(st) == 'string' and st or cjson.encode(st)
end
bulk_write('HSET', KEYS[2], hset)
bulk_write('ZADD', KEYS[5], fin_ok)
bulk_write('ZADD', KEYS[6], fin_failed)
bulk_write('ZADD', KEYS[8], fin_expired)
if finals > 0 then
  close_slice({KEYS[2], KEYS[3], KEYS[5], KEYS[6], KEYS[7], KEYS[8]}, finals, now, retention,
              failed_retention)
end
bulk_write('ZREM', KEYS[4], zrem)
return out

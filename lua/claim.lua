-- claim: lease what is due in one slice. Takes expired leases first (their
-- holder died), then ids due before now + lookahead, oldest first, at most
-- `limit` in all; each moves to :run with a lease deadline.
-- KEYS: due, task, del, run, ptr. ARGV: lookahead_ms, limit, lease_margin_ms
-- Returns {due_left, run_left, taken, id, due_ms, attempt, spec, ...}: spec is
-- nil for a retry pointer (read it from the home slice with fetch); `taken`
-- counts every id consumed, delivered or dropped, so taken == limit means
-- there may be more.
local now = now_ms()
local limit = tonumber(ARGV[2])
local margin = tonumber(ARGV[3])
local out = {0, 0, 0}

local function take(id, due, reclaim)
  if redis.call('SISMEMBER', KEYS[3], id) == 1 then
    redis.call('SREM', KEYS[3], id)
    redis.call('ZREM', KEYS[4], id)
    return
  end
  local pto = redis.call('HGET', KEYS[5], id)
  if pto then
    redis.call('ZADD', KEYS[4], math.max(due, now) + tonumber(pto) + margin, id)
    out[#out + 1] = id; out[#out + 1] = due; out[#out + 1] = 0; out[#out + 1] = false
    return
  end
  local st = state_get(KEYS[2], id)
  if not st or not (st.s == 'scheduled' or (reclaim and st.s == 'running')) then
    redis.call('ZREM', KEYS[4], id)
    return
  end
  st.s = 'running'
  state_put(KEYS[2], id, st)
  redis.call('ZADD', KEYS[4], math.max(st.due, now) + st.to + margin, id)
  out[#out + 1] = id; out[#out + 1] = st.due; out[#out + 1] = st.a + 1
  out[#out + 1] = redis.call('HGET', KEYS[2], id)
end

local taken = 0
local exp = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, limit)
for _, id in ipairs(exp) do
  take(id, now, true)
  taken = taken + 1
end
if taken < limit then
  local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. (now + tonumber(ARGV[1])),
                         'WITHSCORES', 'LIMIT', 0, limit - taken)
  for i = 1, #due, 2 do
    redis.call('ZREM', KEYS[1], due[i])
    take(due[i], tonumber(due[i + 1]), false)
    taken = taken + 1
  end
end
out[1] = redis.call('ZCARD', KEYS[1])
out[2] = redis.call('ZCARD', KEYS[4])
out[3] = taken
return out

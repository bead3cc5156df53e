-- cancel: mark a scheduled task cancelled in its home slice and tombstone it in
-- the lazy-delete SET; the claim drops it. A retry waiting in a later slice is
-- dropped when it is claimed, because its home state says cancelled.
-- KEYS: due, task, del, ok, failed, cancelled, expired (home). ARGV: id, retention_ms,
-- failed_retention_ms
-- Returns {'ok', queue} (the count it leaves; '' when it was cancelled
-- before, or is counted in none), {'notfound'} or {'conflict', status}.
local st = task_state(KEYS[1], KEYS[2], ARGV[1])
if not st then return {'notfound'} end
if st.s == 'cancelled' then return {'ok', ''} end
if st.s ~= 'scheduled' then return {'conflict', st.s} end
local now = now_ms()
st.s = 'cancelled'
st.fin = now
st.mv = nil
state_put(KEYS[2], ARGV[1], st)
if not st.cur then redis.call('SADD', KEYS[3], ARGV[1]) end
redis.call('ZADD', KEYS[6], now, ARGV[1])
close_slice({KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]}, 1, now, tonumber(ARGV[2]),
            tonumber(ARGV[3]))
return {'ok', state_queue(st) or ''}

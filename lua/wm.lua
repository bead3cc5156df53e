-- wm: move bucket b's watermark forward from `from` to `to` (minute numbers),
-- only if nobody moved it since it was read as `from`.
-- KEYS: P:wm:{b}. ARGV: from, to
-- Returns the watermark after the call.
local cur = tonumber(redis.call('GET', KEYS[1]) or ARGV[1])
if cur == tonumber(ARGV[1]) and tonumber(ARGV[2]) > cur then
  redis.call('SET', KEYS[1], ARGV[2])
  return tonumber(ARGV[2])
end
return cur

-- collect: ARGV[2] = batch (the most items one call removes), ARGV[3] =
-- 'all' (counts and ages) or 'count' (counts only, after a policy change).
-- Removes the oldest kept items of each ending that the policy no longer
-- keeps: those beyond its count, then those older than its age (finished
-- at or before now - age). It reads only what it removes: ZCARD, then a
-- range from the oldest. An ending the policy does not keep loses all its
-- items. Returns { removed, more } (more = 1: the batch was used up).
local bad = guard_types(HIST_TYPES)
if bad then return bad end
local batch, ages = tonumber(ARGV[2]), ARGV[3] == 'all'
local v = redis.call('HMGET', K_RET, 'completed', 'cancelled')
local now = now_ms()
local removed = 0
for i, ending in ipairs({ 'completed', 'cancelled' }) do
  local k = keep_bounds(v[i]) or { count = 0 }
  if k.count and removed < batch then removed = removed + trim_kept(ending, k.count, batch - removed) end
  if ages and k.age and removed < batch then
    local zk = K_DONE .. ':' .. ending
    local ms = redis.call('ZRANGE', zk, '-inf', fmt_int(now - k.age), 'BYSCORE', 'LIMIT', 0, batch - removed)
    if #ms > 0 then
      call_chunked('ZREM', zk, ms)
      local ids = {}
      for j, m in ipairs(ms) do ids[j] = fmt_int(tonumber(m)) end
      call_chunked('HDEL', K_DONE, ids)
      removed = removed + #ms
    end
  end
end
local more = 0
if removed >= batch then more = 1 end
return { removed, more }

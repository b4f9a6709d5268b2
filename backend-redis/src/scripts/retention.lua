-- retention: ARGV[2] = 'get': answers the queue's policy, the stored
-- bounds { completed, cancelled, dead } ('age_ms,count'; completed and
-- cancelled false: not kept; dead false: kept for ever).
-- ARGV[2] = 'set', ARGV[3] and ARGV[4] the bounds of completed and
-- cancelled items ('' for an ending kept not at all): stores them, the key
-- gone when neither ending is kept (the ack path then pays one HMGET of a
-- missing key); ARGV[5] the bound of dead letters ('': for ever, the key
-- gone). Trimming to a smaller count is collect.lua's, called next.
local bad = guard_types(HIST_TYPES) or guard_types(DEAD_TYPES)
if bad then return bad end
if ARGV[2] == 'set' then
  for i, ending in ipairs({ 'completed', 'cancelled' }) do
    local v = ARGV[2 + i]
    if v == '' then
      redis.call('HDEL', K_RET, ending)
    else
      keep_bounds(v)
      redis.call('HSET', K_RET, ending, v)
    end
  end
  if ARGV[5] == '' then
    redis.call('DEL', K_RET_DEAD)
  elseif ARGV[5] then
    keep_bounds(ARGV[5])
    redis.call('SET', K_RET_DEAD, ARGV[5])
  end
end
local out = redis.call('HMGET', K_RET, 'completed', 'cancelled')
out[3] = redis.call('GET', K_RET_DEAD)
return out

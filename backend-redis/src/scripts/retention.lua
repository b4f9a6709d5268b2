-- retention: ARGV[2] = 'get': answers the queue's policy, the stored
-- bounds { completed, cancelled } ('age_ms,count', or false: not kept).
-- ARGV[2] = 'set', ARGV[3] and ARGV[4] the bounds of completed and
-- cancelled items ('' for an ending kept not at all): stores them, the key
-- gone when neither ending is kept (the ack path then pays one HMGET of a
-- missing key). Trimming to a smaller count is collect.lua's, called next.
local bad = guard_types(HIST_TYPES)
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
end
return redis.call('HMGET', K_RET, 'completed', 'cancelled')

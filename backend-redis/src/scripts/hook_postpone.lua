-- test hook: every live lease expires ARGV[2] ms later. Returns how many.
local by = tonumber(ARGV[2])
local now = now_ms()
local gs = redis.call('ZRANGEBYSCORE', K_GROUPS, '(' .. fmt_int(now), '+inf', 'WITHSCORES')
local n = 0
for i = 1, #gs, 2 do
  redis.call('ZADD', K_GROUPS, tonumber(gs[i + 1]) + by, gs[i])
  n = n + #group_ids(gs[i])
end
return n

-- test hook: every live lease expires at the server's now. Returns how many.
local now = now_ms()
local n = 0
while true do
  local gs = redis.call('ZRANGEBYSCORE', K_GROUPS, '(' .. fmt_int(now), '+inf', 'LIMIT', 0, 500)
  if #gs == 0 then break end
  for _, g in ipairs(gs) do
    redis.call('ZADD', K_GROUPS, now, g)
    n = n + #group_ids(g)
  end
end
return n

-- test hook: every Scheduled item is due at the server's now. Returns how many.
local now = now_ms()
local n = 0
while true do
  local ms = redis.call('ZRANGEBYSCORE', K_SCHED, '(' .. fmt_int(now), '+inf', 'LIMIT', 0, 500)
  if #ms == 0 then break end
  for _, m in ipairs(ms) do
    redis.call('ZADD', K_SCHED, now, m)
    n = n + 1
  end
end
return n

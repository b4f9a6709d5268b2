-- test hook: every live lease expires at the server's now. Returns how many.
local now = now_ms()
local n = 0
while true do
  local ms = redis.call('ZRANGEBYSCORE', K_LEASED, '(' .. fmt_int(now), '+inf', 'LIMIT', 0, 500)
  if #ms == 0 then break end
  for _, m in ipairs(ms) do
    redis.call('ZADD', K_LEASED, now, m)
    local id = tonumber(m)
    if id and key_type(item_key(id)) == 'hash' then redis.call('HSET', item_key(id), 'due', now) end
    n = n + 1
  end
end
return n

-- ARGV: 1 max groups. Expired leases go back to Ready (zset, score -pri)
-- or to Dead when out of attempts. Cost: the expired groups and their ids.
local bad = guard(K_I, K_RZ, K_L, K_T, K_A, K_X, K_GI, K_GN, K_DEAD)
if bad then return bad end
local now = now_ms()
local gs = redis.call('ZRANGEBYSCORE', K_L, '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
local back, dead = 0, 0
for _, g in ipairs(gs) do
  local ids = {}
  for id in string.gmatch(redis.call('HGET', K_GI, g) or '', '[^,]+') do ids[#ids + 1] = id end
  if #ids > 0 then
    local toks = redis.call('HMGET', K_T, unpack(ids))
    local xs = redis.call('HMGET', K_X, unpack(ids))
    local recs = redis.call('HMGET', K_I, unpack(ids))
    for i, id in ipairs(ids) do
      local t = toks[i]
      -- Still leased under this group: its own group (extended) or its claim's.
      if t and (xs[i] == g or (not xs[i] and t == g)) then
        redis.call('HDEL', K_T, id); redis.call('HDEL', K_X, id)
        local att = redis.call('HINCRBY', K_A, id, 1)
        local _, maxa, pri = string.match(recs[i] or '', '^(%d+),(%d+),(%-?%d+),')
        if att >= tonumber(maxa or '1') then
          redis.call('ZADD', K_DEAD, now, member(tonumber(id))); dead = dead + 1
        else
          redis.call('ZADD', K_RZ, 0 - tonumber(pri or '0'), member(tonumber(id))); back = back + 1
        end
      end
    end
  end
  redis.call('ZREM', K_L, g); redis.call('HDEL', K_GI, g); redis.call('HDEL', K_GN, g)
end
return { back, dead }

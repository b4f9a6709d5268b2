-- test hook: raw index contents { ready, scheduled, leased, dead, items }.
-- Reads everything: for tests only, never on a hot path.
local function ids(list)
  local out = {}
  for _, m in ipairs(list) do out[#out + 1] = tonumber(m) or 0 end
  return out
end
local items = {}
local cursor = '0'
repeat
  local r = redis.call('SCAN', cursor, 'MATCH', ITEM_PREFIX .. '*', 'COUNT', 1000)
  cursor = r[1]
  for _, k in ipairs(r[2]) do
    local id = tonumber(string.sub(k, #ITEM_PREFIX + 1))
    if id and key_type(k) == 'hash' then items[#items + 1] = id end
  end
until cursor == '0'
return { ids(redis.call('ZRANGE', K_READY, 0, -1)), ids(redis.call('ZRANGE', K_SCHED, 0, -1)),
         ids(redis.call('ZRANGE', K_LEASED, 0, -1)), ids(redis.call('ZRANGE', K_DEAD, 0, -1)), items }

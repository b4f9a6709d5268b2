-- test hook: raw index contents { ready, scheduled, leased, dead, items }:
-- Ready is the fifo and the ranked index, Leased every id whose lease is in
-- a group of the group index, items every record. Reads everything: for
-- tests only, never on a hot path.
local function ids(list)
  local out = {}
  for _, m in ipairs(list) do out[#out + 1] = tonumber(m) or 0 end
  return out
end
local function fields(key)
  local out, cursor = {}, '0'
  repeat
    local r = redis.call('HSCAN', key, cursor, 'COUNT', 1000)
    cursor = r[1]
    for i = 1, #r[2] - 1, 2 do
      if r[2][i] ~= WIDE_FIELD then out[#out + 1] = tonumber(r[2][i]) or 0 end
    end
  until cursor == '0'
  return out
end
local ready = ids(redis.call('LRANGE', K_FIFO, 0, -1))
for _, id in ipairs(ids(redis.call('ZRANGE', K_READY, 0, -1))) do ready[#ready + 1] = id end
local leased = {}
for _, g in ipairs(redis.call('ZRANGE', K_GROUPS, 0, -1)) do
  for _, id_s in ipairs(group_ids(g)) do leased[#leased + 1] = tonumber(id_s) end
end
local items = fields(K_ITEMS)
return { ready, ids(redis.call('ZRANGE', K_SCHED, 0, -1)), leased, ids(redis.call('ZRANGE', K_DEAD, 0, -1)), items }

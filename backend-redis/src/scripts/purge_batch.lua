-- Deletes up to `batch` entries of each index and their items. Returns how
-- many items it deleted and how many entries the indexes still hold.
local function purge_batch(batch)
  local deleted, left = 0, 0
  for _, key in pairs(INDEX) do
    local ms = redis.call('ZRANGE', key, 0, batch - 1)
    for _, m in ipairs(ms) do
      local id = tonumber(m)
      if id then
        local k = item_key(id)
        if key_type(k) == 'hash' then deleted = deleted + 1 end
        redis.call('DEL', k)
      end
      redis.call('ZREM', key, m)
    end
    left = left + redis.call('ZCARD', key)
  end
  return deleted, left
end

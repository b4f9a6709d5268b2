-- purge: ARGV[2] = batch size. Deletes up to a batch of entries per index and
-- their items; when every index is empty, the dedup keys (held ones too).
-- Returns { items deleted, more }.
local bad = guard_indexes()
if bad then return bad end
local batch = tonumber(ARGV[2])
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
local more = 1
if left == 0 then
  redis.call('DEL', K_DEDUP, K_NOTIFY, K_HELD, K_HELD_ID)
  more = 0
end
return { deleted, more }

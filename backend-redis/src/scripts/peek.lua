-- peek: ARGV[2] = state, ARGV[3] = limit. Items in index order; due Scheduled
-- items are promoted first so Ready shows claim order. Entries without an
-- item are left for claim and reap to repair.
local bad = guard_indexes()
if bad then return bad end
local state, limit = ARGV[2], tonumber(ARGV[3])
local now = now_ms()
promote_due(now, {})
local out = {}
local ms = redis.call('ZRANGE', INDEX[state], 0, limit - 1)
for _, m in ipairs(ms) do
  local id = tonumber(m)
  if id then
    local k = item_key(id)
    if key_type(k) == 'hash' then out[#out + 1] = item_record(id, k, now) end
  end
end
return out

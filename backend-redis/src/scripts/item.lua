-- item: ARGV[2] = id. Returns the item record, or 0 when there is no item.
local id = tonumber(ARGV[2])
local k = item_key(id)
if key_type(k) ~= 'hash' then return 0 end
return item_record(id, k, now_ms())

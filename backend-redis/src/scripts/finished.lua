-- finished: ARGV[2] = 'one', ARGV[3] = id: the kept record of that item,
-- or false. ARGV[2] = 'list', ARGV[3] = ending ('completed', 'cancelled',
-- or '' for both), ARGV[4] = limit: up to `limit` kept items, newest first
-- (finish time, then id, highest first), as { id, record, ... }. Reads the
-- newest `limit` of each ending's index only.
local bad = guard_types(HIST_TYPES)
if bad then return bad end
if ARGV[2] == 'one' then
  local id = int_field(ARGV[3], 1, ID_MAX)
  if not id then return false end
  return redis.call('HGET', K_DONE, fmt_int(id))
end
local limit = tonumber(ARGV[4])
if limit <= 0 then return {} end
local heads = {}
for _, ending in ipairs({ 'completed', 'cancelled' }) do
  if ARGV[3] == '' or ARGV[3] == ending then
    local r = redis.call('ZRANGE', K_DONE .. ':' .. ending, 0, limit - 1, 'REV', 'WITHSCORES')
    for i = 1, #r, 2 do heads[#heads + 1] = { tonumber(r[i + 1]), r[i] } end
  end
end
table.sort(heads, function(a, b)
  if a[1] ~= b[1] then return a[1] > b[1] end
  return a[2] > b[2]
end)
local ids = {}
for i = 1, math.min(limit, #heads) do ids[i] = fmt_int(tonumber(heads[i][2])) end
local recs = read_chunked('HMGET', K_DONE, ids)
local out = {}
for i, id_s in ipairs(ids) do
  if recs[i] then
    out[#out + 1] = id_s
    out[#out + 1] = recs[i]
  end
end
return out

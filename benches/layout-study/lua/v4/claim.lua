-- ARGV: 1 ttl ms, 2 max, 3 group (24 hex, random per claim).
-- Returns { ids, records, attempts (false: every lease is its item's first attempt), expires at }.
local bad = guard(K_I, K_R0, K_RZ, K_S, K_L, K_T, K_A, K_GI, K_GN)
if bad then return bad end
local ttl, max, g = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local now = now_ms()
local exp = now + ttl
local due = redis.call('ZRANGEBYSCORE', K_S, '-inf', now, 'LIMIT', 0, 500)
if #due > 0 then
  local z = {}
  for _, m in ipairs(due) do
    local rec = redis.call('HGET', K_I, tostring(tonumber(m)))
    local pri = rec and string.match(rec, '^%d+,%d+,(%-?%d+),') or '0'
    z[#z + 1] = 0 - tonumber(pri); z[#z + 1] = m
  end
  redis.call('ZADD', K_RZ, unpack(z))
  redis.call('ZREM', K_S, unpack(due))
end
local ids
if redis.call('EXISTS', K_RZ) == 0 then
  ids = redis.call('LPOP', K_R0, max)
  if not ids then return { {}, {}, false, exp } end
else
  ids = {}
  local zs = redis.call('ZRANGE', K_RZ, '-inf', '0', 'BYSCORE', 'LIMIT', 0, max, 'WITHSCORES')
  local ls = redis.call('LRANGE', K_R0, 0, max - 1)
  local zi, li, zrem, lpop = 1, 1, {}, 0
  while #ids < max do
    local zm, zsc, lm = zs[zi], tonumber(zs[zi + 1]), ls[li]
    if zm and (zsc < 0 or not lm or tonumber(zm) < tonumber(lm)) then
      ids[#ids + 1] = tostring(tonumber(zm)); zrem[#zrem + 1] = zm; zi = zi + 2
    elseif lm then
      ids[#ids + 1] = lm; lpop = lpop + 1; li = li + 1
    else break end
  end
  if #ids < max then
    local rest = redis.call('ZRANGE', K_RZ, '(0', '+inf', 'BYSCORE', 'LIMIT', 0, max - #ids)
    for _, m in ipairs(rest) do ids[#ids + 1] = tostring(tonumber(m)); zrem[#zrem + 1] = m end
  end
  if #zrem > 0 then redis.call('ZREM', K_RZ, unpack(zrem)) end
  if lpop > 0 then redis.call('LPOP', K_R0, lpop) end
  if #ids == 0 then return { {}, {}, false, exp } end
end
local recs = redis.call('HMGET', K_I, unpack(ids))
local atts = false
if redis.call('EXISTS', K_A) == 1 then
  atts = redis.call('HMGET', K_A, unpack(ids))
  for i = 1, #ids do
    local a = atts[i]
    if a then atts[i] = tostring(tonumber(a) + 1) else atts[i] = '1' end
  end
end
local t_args = {}
local n = #ids
local clean = true
for i = 1, n do
  if not recs[i] then clean = false; break end
  t_args[2 * i - 1], t_args[2 * i] = ids[i], g
end
if not clean then
  -- A Ready id without a record: dropped (a repair in the real script).
  local ids2, recs2, atts2 = {}, {}, atts and {} or false
  t_args = {}
  for i = 1, n do
    if recs[i] then
      local k = #ids2 + 1
      ids2[k], recs2[k] = ids[i], recs[i]
      if atts then atts2[k] = atts[i] end
      t_args[2 * k - 1], t_args[2 * k] = ids[i], g
    end
  end
  ids, recs, atts, n = ids2, recs2, atts2, #ids2
  if n == 0 then return { {}, {}, false, exp } end
end
redis.call('HSETNX', K_T, '~', WIDE)
redis.call('HSET', K_T, unpack(t_args))
redis.call('ZADD', K_L, exp, g)
redis.call('HSET', K_GI, g, table.concat(ids, ','))
redis.call('HSET', K_GN, g, n)
return { ids, recs, atts, exp }

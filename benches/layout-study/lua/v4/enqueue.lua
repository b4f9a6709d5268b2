-- ARGV: 1 n, 2 mode ('f': every item priority 0, no delay, no dedup key;
-- 'g': general), 3 client floor (highest id it has seen, 0 none), then per item: 'f' -> the client-packed "max,pri,payload";
-- 'g' -> packed, priority, delay ms, dedup key ('' none).
-- Returns { first id, n } in mode 'f' (ids are first .. first+n-1), else the ids.
-- Types: HINCRBY (the first write) fails on a non-hash items key, RPUSH/ZADD
-- (pcall, before the records are written) on a wrong index type: nothing but
-- the counter has moved then, and skipped ids are harmless.
local n = tonumber(ARGV[1])
local mode = ARGV[2]
local now = now_ms()
local pre = fmt_int(now) .. ','
local info = redis.pcall('INFO', 'replication')
local run = type(info) == 'string' and string.match(info, 'master_replid:(%w+)')
if redis.call('EXISTS', K_LISTED) == 0 then redis.call('SET', K_LISTED, '1') end
local gap = 0
local ran = redis.call('GET', K_RUN)
if run and ran ~= run then
  if ran then gap = 4294967296 end       -- failover or restart: skip ids that may have been lost
  redis.call('SET', K_RUN, run)
end
local hi = redis.call('HINCRBY', K_I, '#seq', n + gap)
local last = hi - n
local floor = tonumber(ARGV[3])
if hi == n + gap and (redis.call('EXISTS', K_R0, K_RZ, K_S, K_L, K_DEAD) > 0) then
  return redis.error_reply('LEASEQ_CORRUPT items hash lost while indexes hold ids: walk the indexes and re-seed (not in the study)')
end
if floor > last then
  last = floor
  hi = last + n
  redis.call('HSET', K_I, '#seq', fmt_int(hi))
end
-- Id strings: one sprintf per 10 ids, the last digit appended.
local ids = {}
local D = { '0', '1', '2', '3', '4', '5', '6', '7', '8', '9' }
local id = last + 1
local head, d = nil, id % 10
local base = (id - d) / 10
for i = 1, n do
  if d == 10 or not head then
    if d == 10 then d = 0; base = base + 1 end
    head = base == 0 and '' or fmt_int(base)
  end
  ids[i] = head .. D[d + 1]
  d = d + 1
end
redis.call('HSETNX', K_I, '~', WIDE)
local h = {}
if mode == 'f' then
  local ok = redis.pcall('RPUSH', K_R0, unpack(ids))
  if type(ok) == 'table' and ok.err then return redis.error_reply('LEASEQ_CORRUPT ' .. K_R0 .. ': ' .. ok.err) end
  for i = 1, n do
    h[2 * i - 1] = ids[i]
    h[2 * i] = pre .. ARGV[3 + i]
  end
  redis.call('HSET', K_I, unpack(h))
  local m = n; if m > 32 then m = 32 end
  local ones = {}
  for i = 1, m do ones[i] = '1' end
  redis.pcall('LPUSH', K_NOTIFY, unpack(ones))
  redis.pcall('LTRIM', K_NOTIFY, 0, 31)
  return { last + 1, n }
end
local r0, rz, sc, dks = {}, {}, {}, {}
for i = 1, n do
  local b = 4 + (i - 1) * 4
  h[2 * i - 1] = ids[i]
  h[2 * i] = pre .. ARGV[b]
  local pri, delay, dk = ARGV[b + 1], ARGV[b + 2], ARGV[b + 3]
  if delay ~= '0' then
    sc[#sc + 1] = now + tonumber(delay); sc[#sc + 1] = member(last + i)
  elseif pri == '0' then
    r0[#r0 + 1] = ids[i]
  else
    rz[#rz + 1] = -tonumber(pri); rz[#rz + 1] = member(last + i)
  end
  if dk ~= '' then dks[#dks + 1] = ids[i]; dks[#dks + 1] = dk end
end
if #r0 > 0 then redis.call('RPUSH', K_R0, unpack(r0)) end
if #rz > 0 then redis.call('ZADD', K_RZ, unpack(rz)) end
if #sc > 0 then redis.call('ZADD', K_S, unpack(sc)) end
if #dks > 0 then redis.call('HSET', K_DK, unpack(dks)) end
redis.call('HSET', K_I, unpack(h))
local out = {}
for i = 1, n do out[i] = last + i end
return out

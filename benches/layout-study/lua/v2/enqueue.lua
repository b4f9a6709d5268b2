-- ARGV: 1 n, 2 mode ('f': every item priority 0, no delay, no dedup key;
-- 'g': general), 3 check ('1': check that every new id is free), then per item: 'f' -> the client-packed "max,pri,payload";
-- 'g' -> packed, priority, delay ms, dedup key ('' none).
-- Returns { first id, n } in mode 'f' (ids are first .. first+n-1), else the ids.
local bad = guard(K_SEQ, K_MARK, K_I, K_R0, K_RZ, K_S)
if bad then return bad end
local n = tonumber(ARGV[1])
local mode = ARGV[2]
local now = now_ms()
local pre = fmt_int(now) .. ','
local seq = tonumber(redis.call('GET', K_SEQ) or '0')
local mark = tonumber(redis.call('GET', K_MARK) or '0')
local info = redis.pcall('INFO', 'replication')
local run = type(info) == 'string' and string.match(info, 'master_replid:(%w+)')
if redis.call('EXISTS', K_LISTED) == 0 then redis.call('SET', K_LISTED, '1') end
local last = math.max(seq, mark)
local ids = {}
for i = 1, n do ids[i] = tostring(last + i) end
if ARGV[3] == '1' then
  local taken = redis.call('HMGET', K_I, unpack(ids))
  for i = 1, n do
    if taken[i] then return redis.error_reply('LEASEQ_CORRUPT counter behind existing items (re-seed not in the study)') end
  end
end
local hi = ids[n]
redis.call('SET', K_SEQ, hi)
redis.call('SET', K_MARK, hi)
redis.call('HSETNX', K_I, '~', WIDE)
local h = {}
local off = mode == 'f' and 3 or 0
if mode == 'f' then
  for i = 1, n do
    h[2 * i - 1] = ids[i]
    h[2 * i] = pre .. ARGV[3 + i]
  end
  redis.call('HSET', K_I, unpack(h))
  redis.call('RPUSH', K_R0, unpack(ids))
  local m = n; if m > 32 then m = 32 end
  local ones = {}
  for i = 1, m do ones[i] = '1' end
  redis.call('LPUSH', K_NOTIFY, unpack(ones))
  redis.call('LTRIM', K_NOTIFY, 0, 31)
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
redis.call('HSET', K_I, unpack(h))
if #r0 > 0 then redis.call('RPUSH', K_R0, unpack(r0)) end
if #rz > 0 then redis.call('ZADD', K_RZ, unpack(rz)) end
if #sc > 0 then redis.call('ZADD', K_S, unpack(sc)) end
if #dks > 0 then redis.call('HSET', K_DK, unpack(dks)) end
local out = {}
for i = 1, n do out[i] = last + i end
return out

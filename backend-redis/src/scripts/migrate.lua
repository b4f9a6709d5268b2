-- migrate: KEYS[2] = '{p:q}:layout1:migrating' (never written: it lets the
-- script run on a queue in key layout 1); ARGV[2] = batch size. Converts up
-- to a batch of entries of each layout 1 index (`{p:q}:ready`, `scheduled`,
-- `leased`, `dead`, members the 20-digit ids) and their item hashes
-- (`{p:q}:item:<id>`) into this layout, each item keeping its state, id,
-- payload, priority, attempts, max attempts, dedup key and hold, last
-- error and enqueue time:
-- - Ready goes to `ready:ranked` (score -priority): the claim order stays;
-- - Scheduled and Dead keep their scores;
-- - a lease keeps its token and expiry, in a group of its own named by
--   the token (as an extended lease), so it still acks, extends, releases
--   and reaps; its attempts are stored as made before the lease.
-- An index entry without an item hash (or malformed) is dropped. The dedup
-- hash, the counters and the holds are the same keys in both layouts.
-- Returns { items migrated, entries the layout 1 indexes still hold }.
local batch = tonumber(ARGV[2])
local now = now_ms()
local OLD = { { 'ready', QUEUE_TAG .. 'ready' }, { 'scheduled', QUEUE_TAG .. 'scheduled' },
              { 'leased', QUEUE_TAG .. 'leased' }, { 'dead', QUEUE_TAG .. 'dead' } }
local bad = guard_all(K_DK, K_UF)
if bad then return bad end
for _, o in ipairs(OLD) do
  local t = key_type(o[2])
  if t ~= 'none' and t ~= 'zset' then
    return redis.error_reply('LEASEQ_CORRUPT key ' .. o[2] .. ' holds a ' .. t .. ', expected a zset')
  end
end
local moved, left = 0, 0
for _, o in ipairs(OLD) do
  local st, key = o[1], o[2]
  local page = redis.call('ZRANGE', key, 0, batch - 1, 'WITHSCORES')
  for i = 1, #page - 1, 2 do
    local m, score = page[i], page[i + 1]
    local id = member_id(m)
    local ik = id and (QUEUE_TAG .. 'item:' .. fmt_int(id))
    local f = ik and redis.pcall('HMGET', ik, 'p', 'pri', 'att', 'max', 'tok', 'dk', 'err', 'enq', 'uf', 'st')
    -- An entry whose item says it is in another layout 1 index that holds
    -- it is a stray: that index's entry migrates the item.
    local stray = f and not f.err and f[10] and f[10] ~= st
    if stray then
      local home = nil
      for _, other in ipairs(OLD) do
        if other[1] == f[10] then home = other[2] end
      end
      stray = home and redis.call('ZSCORE', home, m) ~= false
    end
    if stray then
      ik = nil
    elseif f and not f.err and (f[1] or f[4]) then
      local id_s = fmt_int(id)
      local rec = (f[8] or fmt_int(now)) .. ',' .. (f[4] or '1') .. ',' .. (f[2] or '0')
      -- A missing payload stays missing: the item is quarantined when met.
      if f[1] then rec = rec .. ',' .. f[1] end
      hset_wide(K_ITEMS, { id_s, rec })
      local att = int_field(f[3] or '0', 0, ATT_MAX)
      if st == 'leased' and f[5] then
        redis.call('HSET', K_TOK, id_s, f[5], WIDE_FIELD, WIDE)
        redis.call('HSET', K_MOVED, id_s, f[5])
        redis.call('HSET', K_GIDS, f[5], id_s)
        redis.call('HSET', K_GLIVE, f[5], 1)
        redis.call('ZADD', K_GROUPS, score, f[5])
        if att then att = math.max(att - 1, 0) end
      elseif st == 'scheduled' then
        redis.call('ZADD', K_SCHED, score, m)
      elseif st == 'dead' then
        redis.call('ZADD', K_DEAD, score, m)
      else
        -- Ready, or a lease without a token: Ready at its place.
        redis.call('ZADD', K_READY, 0 - (tonumber(f[2]) or 0), m)
      end
      if att == nil then
        redis.call('HSET', K_ATT, id_s, f[3])
      elseif att > 0 then
        redis.call('HSET', K_ATT, id_s, fmt_int(att))
      end
      if f[6] then redis.call('HSET', K_DK, id_s, f[6]) end
      if f[7] then redis.call('HSET', K_ERR, id_s, f[7]) end
      if f[9] then redis.call('HSET', K_UF, id_s, f[9]) end
      moved = moved + 1
    end
    if ik then redis.call('DEL', ik) end
    redis.call('ZREM', key, m)
  end
  left = left + redis.call('ZCARD', key)
end
return { moved, left }

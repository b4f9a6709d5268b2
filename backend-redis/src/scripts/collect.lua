-- collect: ARGV[2] = batch (the most items one call removes), ARGV[3] =
-- 'all' (counts and ages) or 'count' (counts only, after a policy change).
-- Removes the oldest kept items of each ending that the policy no longer
-- keeps: those beyond its count, then those older than its age (finished
-- at or before now - age). It reads only what it removes: ZCARD, then a
-- range from the oldest. An ending the policy does not keep loses all its
-- items. With 'all', then the dead letters beyond the queue's
-- Retention::dead (`retention:dead`), oldest death first: those beyond
-- its count, then those dead for its age, each deleted as remove_item
-- deletes it (its dedup key freed).
-- Returns { removed, more } (more = 1: the batch was used up).
local bad = guard_types(HIST_TYPES) or guard_types(DEAD_TYPES)
if bad then return bad end
local batch, ages = tonumber(ARGV[2]), ARGV[3] == 'all'
local v = redis.call('HMGET', K_RET, 'completed', 'cancelled')
local dead = ages and keep_bounds(redis.call('GET', K_RET_DEAD))
if dead then
  -- Dead letters go as remove_item deletes them: every key that holds a
  -- field per item is checked before the first write.
  bad = guard_all(K_DEDUP, K_DK, K_UF)
  if bad then return bad end
end
local now = now_ms()
local removed = 0
for i, ending in ipairs({ 'completed', 'cancelled' }) do
  local k = keep_bounds(v[i]) or { count = 0 }
  if k.count and removed < batch then removed = removed + trim_kept(ending, k.count, batch - removed) end
  if ages and k.age and removed < batch then
    local zk = K_DONE .. ':' .. ending
    local ms = redis.call('ZRANGE', zk, '-inf', fmt_int(now - k.age), 'BYSCORE', 'LIMIT', 0, batch - removed)
    if #ms > 0 then
      call_chunked('ZREM', zk, ms)
      local ids = {}
      for j, m in ipairs(ms) do ids[j] = fmt_int(tonumber(m)) end
      call_chunked('HDEL', K_DONE, ids)
      removed = removed + #ms
    end
  end
end

-- Dead letters. `spent` counts index entries taken (a stray entry costs
-- the batch too); `removed` only the items deleted.
local spent = removed
-- Takes the Dead entries `ms` out with their items: an entry whose item is
-- missing or Leased (a stray) leaves the index alone.
local function drop_dead(ms)
  call_chunked('ZREM', K_DEAD, ms)
  spent = spent + #ms
  for _, m in ipairs(ms) do
    local id = member_id(m)
    if id then
      local id_s = fmt_int(id)
      if redis.call('HEXISTS', K_ITEMS, id_s) == 1 and redis.call('HEXISTS', K_TOK, id_s) == 0 then
        drop_record(id_s)
        removed = removed + 1
      end
    end
  end
end
if dead and dead.count and spent < batch then
  local over = math.min(redis.call('ZCARD', K_DEAD) - dead.count, batch - spent)
  if over > 0 then drop_dead(redis.call('ZRANGE', K_DEAD, 0, over - 1)) end
end
-- By age: the oldest deaths first, a page at a time, up to the first one
-- still kept. A letter with no time of death (it died under an earlier
-- version) is given now, and ages from here.
local PAGE = 100
while dead and dead.age and spent < batch do
  local ms = redis.call('ZRANGE', K_DEAD, 0, math.min(PAGE, batch - spent) - 1)
  if #ms == 0 then break end
  local ids = {}
  for j, m in ipairs(ms) do ids[j] = fmt_int(member_id(m) or 0) end
  local at = redis.call('HMGET', K_DEAD_AT, unpack(ids))
  local old = {}
  for j, m in ipairs(ms) do
    local t = int_field(at[j], 0, ID_MAX)
    if member_id(m) and not t then redis.call('HSET', K_DEAD_AT, ids[j], fmt_int(now)) end
    if member_id(m) and not (t and t + dead.age <= now) then break end
    old[#old + 1] = m
  end
  if #old > 0 then drop_dead(old) end
  if #old < #ms then break end
end
local more = 0
if spent >= batch then more = 1 end
return { removed, more }

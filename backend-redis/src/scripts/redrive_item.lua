-- redrive_item: ARGV[2] = id. Moves that Dead item back to Ready with its
-- attempts reset, to the place redrive gives it (score -priority, FIFO by
-- id). The Dead index decides, as for redrive. Returns { code, repairs,
-- problem }: code 1 moved; 0 the item is in another state (nothing
-- changed); -1 no such item (an id outside 1 to ID_MAX included); 2 it
-- stays in Dead because its fields are still unusable (see `unusable`; the
-- problem says which), as redrive leaves such items.
local bad = guard_indexes()
if bad then return bad end
local repairs = {}
local id = int_field(ARGV[2], 1, ID_MAX)
if not id then return { -1, repairs, false } end
local m, k = member(id), item_key(id)
local f = nil
if redis.call('ZSCORE', K_DEAD, m) then
  local _
  _, _, f = check_entry('dead', m, repairs)
end
if not f then
  -- Not Dead (or its Dead entry was stale and is gone now).
  if key_type(k) == 'hash' then return { 0, repairs, false } end
  return { -1, repairs, false }
end
local has_p = redis.call('HEXISTS', k, 'p') == 1
local problem = unusable('0', f[3], f[4], true, has_p)
if problem then return { 2, repairs, problem } end
redis.call('HSET', k, 'att', 0)
to_ready(m, k, 'dead', f[4])
notify(1)
return { 1, repairs, false }

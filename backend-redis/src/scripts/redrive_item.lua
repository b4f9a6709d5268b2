-- redrive_item: ARGV[2] = id. Moves that Dead item back to Ready with its
-- attempts reset, to the place redrive gives it (score -priority, FIFO by
-- id). The Dead index decides, as for redrive. Returns { code, repairs,
-- problem }: code 1 moved; 0 the item is in another state (nothing
-- changed); -1 no such item (an id outside 1 to ID_MAX included); 2 it
-- stays in Dead because its record is still unusable (see `unusable`; the
-- problem says which), as redrive leaves such items.
local bad = guard_all()
if bad then return bad end
local repairs = {}
local id = int_field(ARGV[2], 1, ID_MAX)
if not id then return { -1, repairs, false } end
local m = member(id)
if not redis.call('ZSCORE', K_DEAD, m) then
  if redis.call('HEXISTS', K_ITEMS, fmt_int(id)) == 1 then return { 0, repairs, false } end
  return { -1, repairs, false }
end
local st, problem = redrive_entry(m, repairs)
if st == 'moved' then
  notify(1)
  return { 1, repairs, false }
end
if st == 'kept' then return { 2, repairs, problem } end
-- The Dead entry was stale and is gone now.
if redis.call('HEXISTS', K_ITEMS, fmt_int(id)) == 1 then return { 0, repairs, false } end
return { -1, repairs, false }

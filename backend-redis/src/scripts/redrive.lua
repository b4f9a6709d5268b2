-- redrive: ARGV[2] = limit (bounded by the caller), ARGV[3] = offset: how
-- many Dead entries to step over (items earlier calls of the same redrive
-- left in place). Oldest death first, back to Ready with attempts reset. An
-- item whose record is still outside the limits (see `unusable`: a
-- quarantined item with a bad max attempts or priority, or no payload)
-- stays in Dead. Returns { moved, repairs, more, left in place }.
local bad = guard_all()
if bad then return bad end
local limit, offset = tonumber(ARGV[2]), tonumber(ARGV[3])
local repairs = {}
local ms = redis.call('ZRANGE', K_DEAD, offset, offset + limit - 1)
local moved, kept = 0, 0
for _, m in ipairs(ms) do
  local st = redrive_entry(m, repairs)
  if st == 'moved' then
    moved = moved + 1
  elseif st == 'kept' then
    kept = kept + 1
  end
end
notify(moved)
local more = 0
if #ms >= limit then more = 1 end
return { moved, repairs, more, kept }

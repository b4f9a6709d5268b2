-- redrive: ARGV[2] = limit (bounded by the caller), ARGV[3] = offset: how
-- many Dead entries to step over (items earlier calls of the same redrive
-- left in place). Oldest death first, back to Ready with attempts reset. An
-- item whose other fields are still outside the limits (see `unusable`: a
-- quarantined item with a bad max attempts or priority, or no payload)
-- stays in Dead. Returns { moved, repairs, more, left in place }.
local bad = guard_indexes()
if bad then return bad end
local limit, offset = tonumber(ARGV[2]), tonumber(ARGV[3])
local repairs = {}
local ms = redis.call('ZRANGE', K_DEAD, offset, offset + limit - 1)
local moved, kept = 0, 0
for _, m in ipairs(ms) do
  local id, k, f = check_entry('dead', m, repairs)
  if id then
    local has_p = redis.call('HEXISTS', k, 'p') == 1
    if unusable('0', f[3], f[4], true, has_p) then
      kept = kept + 1
    else
      redis.call('HSET', k, 'att', 0)
      to_ready(m, k, 'dead', f[4])
      moved = moved + 1
    end
  end
end
notify(moved)
local more = 0
if #ms >= limit then more = 1 end
return { moved, repairs, more, kept }

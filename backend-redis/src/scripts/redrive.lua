-- redrive: ARGV[2] = limit (bounded by the caller). Oldest death first, back
-- to Ready with attempts reset. Returns { moved, repairs, more }.
local bad = guard_indexes()
if bad then return bad end
local limit = tonumber(ARGV[2])
local repairs = {}
local ms = redis.call('ZRANGE', K_DEAD, 0, limit - 1)
local moved = 0
for _, m in ipairs(ms) do
  local id, k, f = check_entry('dead', m, repairs)
  if id then
    redis.call('HSET', k, 'att', 0)
    to_ready(m, k, 'dead', f[4])
    moved = moved + 1
  end
end
notify(moved)
local more = 0
if #ms >= limit then more = 1 end
return { moved, repairs, more }

-- give_back: ARGV[2] = id, ARGV[3] = token. The item goes back to Ready at
-- its place (score -priority, FIFO by id) with the attempt its claim counted
-- taken back (attempts - 1, never below 0), and never to Dead.
-- Returns 1, 0 when the lease is lost, or 2 when the item's fields are
-- outside the limits (see `unusable`): it is quarantined instead.
local bad = guard(K_LEASED, K_READY, K_DEAD, K_DSEQ)
if bad then return bad end
local id = tonumber(ARGV[2])
local k, f = fenced(id, ARGV[3])
if not k then return 0 end
local m = member(id)
local problem = unusable(f[3], f[4], f[5], false)
if problem then
  to_dead(m, k, 'leased', 'quarantined: ' .. problem)
  return 2
end
local att = tonumber(f[3]) - 1
if att < 0 then att = 0 end
redis.call('HSET', k, 'att', fmt_int(att))
to_ready(m, k, 'leased', f[5])
notify(1)
return 1

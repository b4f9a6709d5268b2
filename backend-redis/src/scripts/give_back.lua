-- give_back: ARGV[2] = id, ARGV[3] = token. The item goes back to Ready at
-- its place (score -priority, FIFO by id) with the attempt its claim counted
-- taken back (its attempts as before the lease), and never to Dead.
-- Returns 1, 0 when the lease is lost, or 2 when the item's record or
-- attempts are outside the limits (see `unusable`): it is quarantined instead.
local bad = guard_all()
if bad then return bad end
local id = int_field(ARGV[2], 1, ID_MAX)
local id_s, rec, a = fenced(id, ARGV[3])
if not id_s then return 0 end
end_lease(id_s, ARGV[3])
trace_finished({ id_s }, { ARGV[3] }, now_ms())
local problem, r = unusable(rec, a)
if problem then
  to_dead(id, 'quarantined: ' .. problem)
  return 2
end
to_ready(id, r[3])
notify(1)
return 1

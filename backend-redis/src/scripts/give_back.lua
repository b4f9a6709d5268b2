-- give_back: ARGV[2] = id, ARGV[3] = token, ARGV[4] = delay ms (a snooze,
-- leaseq_core::Control::snooze; absent or 0: back now). The item goes back
-- to Ready at its place (score -priority, FIFO by id), or to Scheduled
-- after the delay, with the attempt its claim counted taken back (its
-- attempts as before the lease), and never to Dead.
-- Returns 1 ready, 4 scheduled, 0 when the lease is lost, 2 when the
-- item's record or attempts are outside the limits (see `unusable`): it is
-- quarantined instead, or 3 when an operator asked to cancel the item: it
-- ends Cancelled.
local bad = guard_all()
if bad then return bad end
local id = int_field(ARGV[2], 1, ID_MAX)
local id_s, rec, a = fenced(id, ARGV[3])
if not id_s then return 0 end
local cancelled = finish_cancelled(id_s, ARGV[3], 3)
if cancelled then return cancelled end
local now = now_ms()
end_lease(id_s, ARGV[3])
local problem, r = unusable(rec, a)
if problem then
  to_dead(id, 'quarantined: ' .. problem)
  ev_flush()
  return 2
end
ev('released', id_s)
ev_flush()
local delay = tonumber(ARGV[4]) or 0
if delay > 0 then
  to_scheduled(id, now + delay)
  return 4
end
to_ready(id, r[3])
notify(1)
return 1

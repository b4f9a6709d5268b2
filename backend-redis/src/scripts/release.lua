-- release: ARGV[2] = id, ARGV[3] = token, ARGV[4] = delay ms.
-- Returns 0 lost, 1 ready, 2 scheduled, 3 dead (attempts exhausted, or
-- quarantined: record or attempts outside the limits, see `unusable`), 4
-- cancelled (an operator asked to cancel the item: it ends Cancelled).
local bad = guard_all()
if bad then return bad end
local id = int_field(ARGV[2], 1, ID_MAX)
local id_s, rec, a = fenced(id, ARGV[3])
if not id_s then return 0 end
local cancelled = finish_cancelled(id_s, ARGV[3], 4)
if cancelled then return cancelled end
end_lease(id_s, ARGV[3])
local problem, r, att = unusable(rec, a)
if problem then
  -- Poison planted while leased: it goes where a claim would put it.
  to_dead(id, 'quarantined: ' .. problem)
  ev_flush()
  return 3
end
local delay = tonumber(ARGV[4])
local due = nil
if delay > 0 then due = now_ms() + delay end
local st = after_attempt(id, r, att, 'attempts exhausted', due)
if st ~= 'dead' then ev('released', id_s) end
ev_flush()
if st == 'dead' then return 3 end
if st == 'scheduled' then return 2 end
notify(1)
return 1

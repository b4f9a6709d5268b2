-- fail: ARGV[2] = id, ARGV[3] = token, ARGV[4] = reason. Returns 1, 2 when
-- an operator asked to cancel the item (it ends Cancelled, not Dead), or 0
-- when lost.
local bad = guard_all()
if bad then return bad end
local id = int_field(ARGV[2], 1, ID_MAX)
local id_s, _, a = fenced(id, ARGV[3])
if not id_s then return 0 end
local cancelled = finish_cancelled(id_s, ARGV[3], 2)
if cancelled then return cancelled end
end_lease(id_s, ARGV[3])
set_attempts(id_s, math.min((int_field(a or '0', 0, ATT_MAX) or 0) + 1, ATT_MAX))
to_dead(id, ARGV[4])
ev_flush()
return 1

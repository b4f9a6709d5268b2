-- run_now: ARGV[2] = id (leaseq_core::Control::run_now). A Scheduled item
-- not yet due moves to Ready at its place (score -priority, FIFO by id),
-- as a due one would (see `promote_due`). Returns { 1, repairs } moved, { 0,
-- repairs } in another state (nothing changed; a due Scheduled item is
-- Ready already; a stray or poisoned entry repaired), or { -1, repairs }
-- no such item.
local bad = guard_all()
if bad then return bad end
local repairs = {}
local id = int_field(ARGV[2], 1, ID_MAX)
if not id then return { -1, repairs } end
local id_s, m = fmt_int(id), member(id)
local state, due = state_of(id, id_s, m)
if not state then return { -1, repairs } end
if state ~= 'scheduled' or due <= now_ms() then return { 0, repairs } end
local moved = promote_due(0, repairs, { m })
ev_flush()
return { moved, repairs }

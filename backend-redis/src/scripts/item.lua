-- item: ARGV[2] = id. Returns { record, repairs }, or 0 when there is no
-- item. An item whose record or attempts are outside the limits (see
-- `unusable`) is quarantined as a claim would do it (see `inspect_poison`)
-- and shown as Dead.
local bad = guard_all(K_DK)
if bad then return bad end
local id = int_field(ARGV[2], 1, ID_MAX)
if not id then return 0 end
local repairs = {}
local rec, problem, home = item_record(id, now_ms())
if not rec then return 0 end
if problem then inspect_poison(rec, problem, home, repairs) end
ev_flush()
return { rec, repairs }

-- remove_item: ARGV[2] = id. Deletes that item from whatever state it is in:
-- its record, its entry in every index (a stray second entry too), and its
-- dedup key when it holds it; no unique-for hold starts (it was not acked).
-- A lease on it is lost with it. Returns { 1, state } with the state the
-- item was in as `item` shows it (a Scheduled item past its due time is
-- Ready), or { -1 } when there is no such item (an id outside 1 to ID_MAX
-- included): nothing changed.
local bad = guard_all(K_DEDUP, K_DK, K_UF)
if bad then return bad end
local id = int_field(ARGV[2], 1, ID_MAX)
if not id then return { -1 } end
local state, due = state_of(id, fmt_int(id), member(id))
if not state then return { -1 } end
state = as_read(state, due, now_ms())
remove_item(id)
return { 1, state }

-- remove_item: ARGV[2] = id. Deletes that item from whatever state it is in:
-- its hash, its entry in every index (a stray second entry too), and its
-- dedup key when it holds it; no unique-for hold starts (it was not acked).
-- A lease on it is lost with the hash. Returns { 1, state } with the state
-- the item was in as `item` shows it (a Scheduled item past its due time is
-- Ready), or { -1 } when there is no such item (an id outside 1 to ID_MAX, or
-- a key that is not an item hash, as for `item`): nothing changed.
local bad = guard_indexes(K_DEDUP)
if bad then return bad end
local id = int_field(ARGV[2], 1, ID_MAX)
if not id then return { -1 } end
local m, k = member(id), item_key(id)
if key_type(k) ~= 'hash' then return { -1 } end
local f = redis.call('HMGET', k, 'st', 'due', 'dk')
local state = f[1]
if not INDEX[state] then state = home_of(m) or 'ready' end
state = as_read(state, int_field(f[2], 0, ID_MAX), now_ms())
remove_item(id, m, k, f[3], nil)
return { 1, state }

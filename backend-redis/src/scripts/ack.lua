-- ack: ARGV[2] = id, ARGV[3] = token. Returns 1, or 0 when the lease is lost.
local bad = guard(K_LEASED, K_DEDUP)
if bad then return bad end
local id = tonumber(ARGV[2])
local k, f = fenced(id, ARGV[3])
if not k then return 0 end
hold_after_ack(id, k, f[6])
remove_item(id, member(id), k, f[6], 'leased')
return 1

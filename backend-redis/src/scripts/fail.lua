-- fail: ARGV[2] = id, ARGV[3] = token, ARGV[4] = reason. Returns 1, or 0 when lost.
local bad = guard(K_LEASED, K_DEAD, K_DSEQ)
if bad then return bad end
local id = tonumber(ARGV[2])
local k = fenced(id, ARGV[3])
if not k then return 0 end
to_dead(member(id), k, 'leased', ARGV[4])
return 1

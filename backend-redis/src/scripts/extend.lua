-- extend: ARGV[2] = id, ARGV[3] = token, ARGV[4] = ttl ms. Returns the new expiry, or 0 when lost.
local bad = guard(K_LEASED)
if bad then return bad end
local id = tonumber(ARGV[2])
local k = fenced(id, ARGV[3])
if not k then return 0 end
local exp = now_ms() + tonumber(ARGV[4])
redis.call('HSET', k, 'due', exp)
set_home(member(id), 'leased', 'leased', exp)
return exp

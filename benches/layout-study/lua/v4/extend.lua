-- ARGV: 1 id, 2 group (the token's first 24 hex digits), 3 ttl. Returns the new expiry, or 0 when the lease is lost.
-- The lease leaves its group for one of its own (recorded in ext).
local bad = guard(K_L, K_T, K_X, K_GI, K_GN, K_GSEQ)
if bad then return bad end
local id, tok = ARGV[1], ARGV[2]
if redis.call('HGET', K_T, id) ~= tok then return 0 end
local exp = now_ms() + tonumber(ARGV[3])
local old = redis.call('HGET', K_X, id) or tok
if redis.call('HGET', K_GN, old) == '1' then
  redis.call('ZADD', K_L, exp, old)          -- alone in its group: move the group
  return exp
end
local gs = 'x' .. fmt_int(redis.call('INCR', K_GSEQ))
redis.call('ZADD', K_L, exp, gs)
redis.call('HSET', K_GI, gs, id)
redis.call('HSET', K_GN, gs, 1)
redis.call('HSET', K_X, id, gs)
leave_groups({ [old] = 1 })
return exp

-- extend: ARGV[2] = id, ARGV[3] = token, ARGV[4] = ttl ms. Returns { the new
-- expiry, 1 when an operator asked to cancel the item (the lease is
-- extended all the same) else 0 }, or 0 when lost. A lease alone in its group (or already moved out
-- of its claim's) just rescores the group; any other moves out into a group
-- of its own, named by its token, so the rest of its claim keeps its expiry.
local bad = guard_all()
if bad then return bad end
local id_s = fenced(int_field(ARGV[2], 1, ID_MAX), ARGV[3])
if not id_s then return 0 end
local token = ARGV[3]
local exp = now_ms() + tonumber(ARGV[4])
local exp_s = fmt_int(exp)
local g = group_of(id_s, token)
if g ~= token and (tonumber(redis.call('HGET', K_GLIVE, g)) or 0) > 1 then
  leave_groups({ [g] = 1 })
  redis.call('HSET', K_MOVED, id_s, token)
  redis.call('HSET', K_GIDS, token, id_s)
  redis.call('HSET', K_GLIVE, token, 1)
  g = token
end
redis.call('ZADD', K_GROUPS, exp_s, g)
if cancel_requested(id_s, token) then return { exp, 1 } end
return { exp, 0 }

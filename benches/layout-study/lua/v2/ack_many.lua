-- ARGV: 1 n, 2..n+1 ids, n+2..2n+1 tokens, then runs: group, count, ... (the
-- leases in ARGV order, grouped by their token's prefix, as the client sent them).
-- Returns the positions of lost leases.
local bad = guard(K_I, K_L, K_T, K_A, K_X, K_GI, K_GN, K_DK)
if bad then return bad end
local n = tonumber(ARGV[1])
local toks = redis.call('HMGET', K_T, unpack(ARGV, 2, n + 1))
local lost, ok, done, cnt = {}, {}, {}, {}
local r, i = 2 * n + 2, 1
while i <= n do
  local g, len = ARGV[r], tonumber(ARGV[r + 1])
  local c = 0
  for j = i, i + len - 1 do
    local id = ARGV[1 + j]
    if toks[j] == ARGV[1 + n + j] and not done[id] then
      done[id] = true
      ok[#ok + 1] = id
      c = c + 1
    else
      lost[#lost + 1] = j
    end
  end
  if c > 0 then cnt[g] = (cnt[g] or 0) + c end
  i, r = i + len, r + 2
end
if #ok > 0 then
  if redis.call('EXISTS', K_X) == 1 then
    -- Extended leases count against the group they moved to.
    local xs = redis.call('HMGET', K_X, unpack(ok))
    local moved = {}
    for k = 1, #ok do
      local x = xs[k]
      if x then
        local tg = string.sub(redis.call('HGET', K_T, ok[k]), 1, 24)
        cnt[tg] = cnt[tg] - 1
        cnt[x] = (cnt[x] or 0) + 1
        moved[#moved + 1] = ok[k]
      end
    end
    if #moved > 0 then redis.call('HDEL', K_X, unpack(moved)) end
  end
  if redis.call('EXISTS', K_DK) == 1 then
    redis.call('HMGET', K_DK, unpack(ok))
    redis.call('HDEL', K_DK, unpack(ok))
  end
  if redis.call('EXISTS', K_A) == 1 then redis.call('HDEL', K_A, unpack(ok)) end
  redis.call('HDEL', K_T, unpack(ok))
  redis.call('HDEL', K_I, unpack(ok))
  for g, c in pairs(cnt) do if c == 0 then cnt[g] = nil end end
  leave_groups(cnt)
end
return lost

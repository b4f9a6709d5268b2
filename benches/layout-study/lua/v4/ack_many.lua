-- ARGV: 1 n, 2..n+1 ids, then runs: group, count, ... (the leases in ARGV
-- order, grouped by their token's first 24 hex digits, as the client sent them).
-- Returns the positions of lost leases.
local bad = guard(K_I, K_L, K_T, K_A, K_X, K_GI, K_GN, K_DK)
if bad then return bad end
local n = tonumber(ARGV[1])
local toks = redis.call('HMGET', K_T, unpack(ARGV, 2, n + 1))
-- Fast path: one group, every lease live (the client sends no id twice: a
-- repeated id is reported lost by the client itself).
if ARGV[n + 3] == ARGV[1] and redis.call('EXISTS', K_X, K_DK, K_A) == 0 then
  local g = ARGV[n + 2]
  local all = true
  for j = 1, n do
    if toks[j] ~= g then all = false; break end
  end
  if all then
    redis.call('HDEL', K_T, unpack(ARGV, 2, n + 1))
    redis.call('HDEL', K_I, unpack(ARGV, 2, n + 1))
    leave_groups({ [g] = n })
    return {}
  end
end
local lost, ok, done, cnt = {}, {}, {}, {}
local r, i = n + 2, 1
while i <= n do
  local g, len = ARGV[r], tonumber(ARGV[r + 1])
  local c = 0
  for j = i, i + len - 1 do
    local id = ARGV[1 + j]
    if toks[j] == g and not done[id] then
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
    local xs = redis.call('HMGET', K_X, unpack(ok))
    local moved = {}
    for k = 1, #ok do
      local x = xs[k]
      if x then
        local tg = redis.call('HGET', K_T, ok[k])
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

-- ack_many: ARGV[2] = n, then n pairs of id, token. Each lease is fenced on
-- its own; returns per lease 1, or 0 when that lease is lost. A lease named
-- twice is acked once: the second time it gets 0. The items' keys and index
-- entries are removed with one DEL and one ZREM for the batch.
local bad = guard(K_LEASED, K_DEDUP)
if bad then return bad end
local n = tonumber(ARGV[2])
local out, done, keys, members = {}, {}, {}, {}
for i = 0, n - 1 do
  local id = tonumber(ARGV[3 + 2 * i])
  local k, f = nil, nil
  if id and not done[id] then k, f = fenced(id, ARGV[4 + 2 * i]) end
  if k then
    done[id] = true
    local dk = f[6]
    hold_after_ack(id, k, dk)
    if dk and redis.call('HGET', K_DEDUP, dk) == fmt_int(id) then
      redis.call('HDEL', K_DEDUP, dk)
    end
    keys[#keys + 1] = k
    members[#members + 1] = member(id)
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
call_chunked('DEL', nil, keys)
call_chunked('ZREM', K_LEASED, members)
return out

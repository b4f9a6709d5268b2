-- ack_many: ARGV[2] = n, then n pairs of id, token. Each lease is fenced on
-- its own. Returns the positions (1 to n) of the leases that were lost, in
-- order: an empty array when every lease was acked. A lease named twice is
-- acked once: the second time it is lost. The items' keys and index
-- entries are removed with one DEL and one ZREM for the batch, and each
-- item is read with one HMGET of the three fields an ack needs.
local bad = guard(K_LEASED, K_DEDUP)
if bad then return bad end
local n = tonumber(ARGV[2])
local lost, done, keys, members = {}, {}, {}, {}
for i = 0, n - 1 do
  local id = tonumber(ARGV[3 + 2 * i])
  local ok = false
  if id and not done[id] then
    local k = item_key(id)
    local f = redis.pcall('HMGET', k, 'st', 'tok', 'dk')
    if not f.err and f[1] == 'leased' and f[2] == ARGV[4 + 2 * i] then
      ok = true
      done[id] = true
      local dk = f[3]
      if dk then
        hold_after_ack(id, k, dk)
        if redis.call('HGET', K_DEDUP, dk) == fmt_int(id) then
          redis.call('HDEL', K_DEDUP, dk)
        end
      end
      keys[#keys + 1] = k
      members[#members + 1] = member(id)
    end
  end
  if not ok then lost[#lost + 1] = i + 1 end
end
call_chunked('DEL', nil, keys)
call_chunked('ZREM', K_LEASED, members)
return lost

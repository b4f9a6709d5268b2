-- ack_many: ARGV[2] = n, then n pairs of id, token. Each lease is fenced on
-- its own; returns per lease 1, or 0 when that lease is lost. A lease named
-- twice finds its item gone the second time: 0.
local bad = guard(K_LEASED, K_DEDUP)
if bad then return bad end
local n = tonumber(ARGV[2])
local out = {}
for i = 0, n - 1 do
  local id = tonumber(ARGV[3 + 2 * i])
  local k, f = fenced(id, ARGV[4 + 2 * i])
  if k then
    remove_item(id, member(id), k, f[6], 'leased')
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out

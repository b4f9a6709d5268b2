-- lease_fate: ARGV[2] = id, ARGV[3] = token, ARGV[4] = the latest expiry
-- the lease's holder knows (ms). One read; changes nothing.
-- Returns { 1, false } held (the item's token is still this one), else
-- { 2, state } finished when the server's now is before that expiry (state
-- false: the item is gone), else { 3, false } lost.
local id = tonumber(ARGV[2])
local k = item_key(id)
local st = false
if key_type(k) == 'hash' then
  local f = redis.call('HMGET', k, 'st', 'tok')
  if f[1] == 'leased' and f[2] == ARGV[3] then return { 1, false } end
  st = f[1] or 'ready'
end
if now_ms() < tonumber(ARGV[4]) then return { 2, st } end
return { 3, false }

-- lease_fate: ARGV[2] = id, ARGV[3] = token, ARGV[4] = the latest expiry
-- the lease's holder knows (ms). One read; changes nothing.
-- Returns { 1, false } held (the item's token is still this one), else
-- { 2, state } finished when the server's now is before that expiry (state
-- false: the item is gone; a Scheduled item past its due time is Ready, as
-- every read shows it), else { 3, false } lost.
local id = tonumber(ARGV[2])
local k = item_key(id)
local now = now_ms()
local st = false
if key_type(k) == 'hash' then
  local f = redis.call('HMGET', k, 'st', 'tok', 'due')
  if f[1] == 'leased' and f[2] == ARGV[3] then return { 1, false } end
  st = as_read(f[1] or 'ready', int_field(f[3], 0, ID_MAX), now)
end
if now < tonumber(ARGV[4]) then return { 2, st } end
return { 3, false }

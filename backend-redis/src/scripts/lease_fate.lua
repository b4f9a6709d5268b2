-- lease_fate: ARGV[2] = id, ARGV[3] = token, ARGV[4] = the latest expiry
-- the lease's holder knows (ms). One read; changes nothing.
-- Returns { 1, false } held (the item's token is still this one), else
-- { 2, state } finished when a trace says the lease's own call ended it, or
-- when the server's now is before that expiry (state
-- false: the item is gone; a Scheduled item past its due time is Ready, as
-- every read shows it), else { 3, false } lost.
local id = int_field(ARGV[2], 1, ID_MAX)
local now = now_ms()
local st = false
if id then
  local id_s = fmt_int(id)
  if redis.call('HGET', K_TOK, id_s) == ARGV[3] then return { 1, false } end
  local home, due = state_of(id, id_s, member(id))
  if home then st = as_read(home, due, now) end
end
if now < tonumber(ARGV[4]) or (id and traced(fmt_int(id), ARGV[3], now)) then return { 2, st } end
return { 3, false }

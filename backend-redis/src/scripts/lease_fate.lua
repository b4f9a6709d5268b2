-- lease_fate: ARGV[2] = id, ARGV[3] = token, ARGV[4] = the latest expiry
-- the lease's holder knows (ms). One read; changes nothing.
-- Returns { 1, false } held (the item's token is still this one), else
-- { 2, state } finished when the server's now is before that expiry, or
-- when no reap took the lease as far as the takeover traces tell (state
-- false: the item is gone; a Scheduled item past its due time is Ready, as
-- every read shows it), else { 3, false } lost.
local id = int_field(ARGV[2], 1, ID_MAX)
local now = now_ms()
local st = false
local id_s = id and fmt_int(id)
if id then
  if redis.call('HGET', K_TOK, id_s) == ARGV[3] then return { 1, false } end
  local home, due = state_of(id, id_s, member(id))
  if home then st = as_read(home, due, now) end
end
local held_until = tonumber(ARGV[4])
if now < held_until or (id and own_end(id_s, ARGV[3], held_until, now)) then return { 2, st } end
return { 3, false }

-- progress: ARGV[2] = id, ARGV[3] = token, ARGV[4] = the value
-- (leaseq_core::Control::progress). Fenced like ack: stores the token and
-- the value in `progress`, replacing what this lease stored before (a read
-- shows it only while the token is the item's, so a new lease starts with
-- none). Returns 1, or 0 when the lease is lost (nothing written).
local id = int_field(ARGV[2], 1, ID_MAX)
if not id then return 0 end
local id_s = fmt_int(id)
if redis.call('HGET', K_TOK, id_s) ~= ARGV[3] then return 0 end
redis.call('HSET', K_PROG, id_s, ARGV[3] .. ARGV[4])
ev('progress', id_s, nil, ARGV[4])
ev_flush()
return 1

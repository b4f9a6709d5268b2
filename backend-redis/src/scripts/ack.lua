-- ack: ARGV[2] = id, ARGV[3] = token, ARGV[4] = the handler's result
-- (leaseq_core::History::complete; absent for a plain ack), kept only when
-- the queue keeps completed items. Returns 1, or 0 when the lease is lost.
-- An item an operator asked to cancel ends Cancelled: deleted the same way,
-- but no unique-for hold starts (see `ack_items`).
local bad = guard_all(K_DEDUP, K_DK, K_UF) or guard_types(HOLD_TYPES)
if bad then return bad end
local id_s = ARGV[2]
local token = redis.call('HGET', K_TOK, id_s)
if not token or token ~= ARGV[3] then return 0 end
local now = now_ms()
count_completed(ack_items({ id_s }, { token }, now, ARGV[4]))
ev_flush()
return 1

-- ack_many: ARGV[2] = n (at most leaseq_core::limits::MAX_ACK_BATCH), then
-- the n ids, then their n tokens as one value, 32 hex digits each: lease k
-- is item ARGV[2 + k] with the k-th token.
-- The client sends no pair twice (it reports a repeat lost itself). Each
-- lease is fenced on its own. Returns the positions (1 to n) of the leases
-- that were lost, in order: an empty array when every lease was acked.
-- A batch reads the tokens with one HMGET and deletes its items with one
-- HDEL per hash.
local n = tonumber(ARGV[2])
local toks = redis.call('HMGET', K_TOK, unpack(ARGV, 3, n + 2))
local TOKENS = ARGV[3 + n]
local lost = {}
for k = 1, n do
  -- Compared in place (a plain find anchored at the token's offset): no
  -- string is made per lease.
  local t, at = toks[k], 32 * k - 31
  if not (t and #t == 32 and string.find(TOKENS, t, at, true) == at) then lost[#lost + 1] = k end
end
-- The common case: every lease live, none moved out of its group, no item
-- with a dedup key, attempts, an error, a cancel request or progress, and
-- a queue that keeps no finished item and that nobody follows (its job
-- events: `events:on`); the same EXISTS answers for all.
-- No guard is needed: the items hash's HDEL, the first write, fails on a
-- wrong type before anything changed, and the token index was read.
if #lost == 0 and redis.call('EXISTS', K_MOVED, K_DK, K_ATT, K_ERR, K_CANCEL, K_PROG, K_RET, QUEUE_TAG .. 'events:on') == 0 then
  redis.call('HDEL', K_ITEMS, unpack(ARGV, 3, n + 2))
  count_completed(n)
  redis.call('HDEL', K_TOK, unpack(ARGV, 3, n + 2))
  leave_groups(group_counts(toks, false))
  return lost
end
local bad = guard_all(K_DEDUP, K_DK, K_UF) or guard_types(HOLD_TYPES)
if bad then return bad end
local ok, ok_tok, j = {}, {}, 1
for k = 1, n do
  if lost[j] == k then
    j = j + 1
  else
    ok[#ok + 1] = ARGV[2 + k]
    ok_tok[#ok_tok + 1] = toks[k]
  end
end
if #ok > 0 then
  local now = now_ms()
  count_completed(ack_items(ok, ok_tok, now))
  ev_flush()
end
return lost

-- recover_claim: ARGV[2] = a claim's token family (the first 24 of a
-- token's 32 lowercase hex digits), ARGV[3] = the claim's ttl (ms). Claims
-- nothing new.
-- Returns { leases, repairs }: every lease whose token is of that family
-- and still holds its item, live or expired but not yet reaped (its group
-- then renewed to now + ttl, in this step), as claim returns a lease:
-- { id, token, payload, attempts, max attempts, priority, expires at,
-- expires at - enqueued at }.
-- A lease whose item's record or attempts are outside the limits (see
-- `unusable`; poison planted after the claim) is quarantined to Dead and
-- reported as a repair instead of returned.
-- It reads the family's group and, for leases extended out of it, every
-- moved lease: its cost grows with the claim and with the queue's extended
-- leases. It runs only after a claim whose reply was lost.
local bad = guard_all()
if bad then return bad end
local family = ARGV[2]
local now = now_ms()
local renewed = now + tonumber(ARGV[3])
local cand, seen = {}, {}
local function consider(id_s)
  if decimal_id(id_s) and not seen[id_s] then
    seen[id_s] = true
    cand[#cand + 1] = id_s
  end
end
for s in string.gmatch(redis.call('HGET', K_GIDS, family) or '', '[^,]+') do consider(s) end
local cursor = '0'
repeat
  local r = redis.call('HSCAN', K_MOVED, cursor, 'COUNT', 500)
  cursor = r[1]
  for i = 1, #r[2] - 1, 2 do
    if string.sub(r[2][i + 1], 1, 24) == family then consider(r[2][i]) end
  end
until cursor == '0'
local out, repairs = {}, {}
for _, id_s in ipairs(cand) do
  local tok = redis.call('HGET', K_TOK, id_s)
  if tok and string.len(tok) == 32 and string.sub(tok, 1, 24) == family then
    local exp = lease_expiry(id_s, tok)
    if exp and exp <= now then
      -- Expired, not reaped: renewed with its whole group (one claim's).
      redis.call('ZADD', K_GROUPS, fmt_int(renewed), group_of(id_s, tok))
      exp = renewed
    end
    if exp then
      local id = tonumber(id_s)
      local problem, r, att = unusable(redis.call('HGET', K_ITEMS, id_s), redis.call('HGET', K_ATT, id_s))
      if problem then
        end_lease(id_s, tok)
        quarantine(id, 'leased', problem, repairs)
      else
        local rec = redis.call('HGET', K_ITEMS, id_s)
        out[#out + 1] = { id, tok, string.sub(rec, r[4]), att + 1, tonumber(r[2]), tonumber(r[3]), exp,
                          exp - tonumber(r[1]) }
      end
    end
  end
end
ev_flush()
return { out, repairs }

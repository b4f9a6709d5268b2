-- recover_claim: ARGV[2] = a claim's token family (the first 24 of a
-- token's 32 lowercase hex digits). Claims nothing.
-- Returns { leases, repairs }: every live lease (expiry after the server's
-- now) whose token is of that family, as claim returns a lease:
-- { id, token, payload, attempts, max attempts, priority, expires at,
-- expires at - enqueued at } (the claim wrote `enq` if it was missing).
-- A lease whose item's fields are outside the limits (see `unusable`;
-- poison planted after the claim) is quarantined to Dead and reported as a
-- repair instead of returned.
-- It walks the live part of the Leased index in pages of bounded size (by
-- rank, so each page costs O(log N + page)): its cost grows with the
-- queue's live leases. It runs only after a claim whose reply was lost.
local bad = guard(K_LEASED, K_DEAD, K_DSEQ)
if bad then return bad end
local family = ARGV[2]
local now = now_ms()
local first = redis.call('ZCOUNT', K_LEASED, '-inf', now)
local total = redis.call('ZCARD', K_LEASED)
local PAGE = 500
local out, poisoned, repairs = {}, {}, {}
for start = first, total - 1, PAGE do
  local page = redis.call('ZRANGE', K_LEASED, start, start + PAGE - 1, 'WITHSCORES')
  for i = 1, #page - 1, 2 do
    local m, exp = page[i], tonumber(page[i + 1])
    local id = tonumber(m)
    if id and id >= 1 and id == math.floor(id) and member(id) == m and exp and exp > now then
      local f = redis.pcall('HMGET', item_key(id), 'st', 'tok', 'p', 'att', 'max', 'pri', 'enq')
      local tok = (not f.err) and f[2]
      if tok and f[1] == 'leased' and string.len(tok) == 32 and string.sub(tok, 1, 24) == family then
        local problem = unusable(f[4], f[5], f[6], false, type(f[3]) == 'string')
        if problem then
          -- Moved after the walk: removing entries now would shift the ranks
          -- of the pages still to read.
          poisoned[#poisoned + 1] = { m, id, problem }
        else
          local enq = int_field(f[7], 0, ID_MAX) or now
          out[#out + 1] = { id, tok, f[3], tonumber(f[4]), tonumber(f[5]), tonumber(f[6]), exp, exp - enq }
        end
      end
    end
  end
end
for _, p in ipairs(poisoned) do
  quarantine(p[1], p[2], item_key(p[2]), 'leased', p[3], repairs)
end
return { out, repairs }

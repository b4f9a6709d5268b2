-- claim: ARGV[2] = lease ttl ms, ARGV[3] = max, ARGV[4..] = one fresh token per slot;
-- KEYS[10] = the queue's limits hash (scripts/limits.lua).
-- Returns { leases, repairs, more, retry after ms or nil, expires at }
-- where leases is one flat array, six values per lease: id, payload,
-- attempts, max attempts, priority, expires at - enqueued at (a difference:
-- a few digits instead of thirteen). The k-th lease holds the k-th token of
-- ARGV and every lease of the call expires at the same time, so neither is
-- sent back. more = 1 when the call stopped at its repair budget with slots
-- still open. An item without an `enq` field (written before the field
-- existed) gets this claim's time, written to the item so its later claims
-- and inspection show the same.
-- An item whose fields are outside the limits (see `unusable`) is
-- quarantined to Dead and reported as a repair, never leased.
local bad = guard_indexes()
if bad then return bad end
local ttl, max = tonumber(ARGV[2]), tonumber(ARGV[3])
local now = now_ms()
local exp = now + ttl
-- Numbers go to commands as strings made once: a Lua number argument is
-- formatted as a float on every call.
local exp_s = fmt_int(exp)
local allowed, refused = limits_admit(now, max)
if refused then return refused end
max = allowed
local repairs = {}
promote_due(now, repairs)
local leases, n = {}, 0
-- Per call, by field value: the attempts after this claim (a number and
-- its text) and the enqueue time (false: not an integer). A batch's items
-- mostly share both, and a lookup costs less than a parse and a format.
local after, enq_at = {}, {}
local examined, budget, more = 0, max + 1000, 0
while n < max do
  local ms = redis.call('ZRANGE', K_READY, 0, max - n - 1)
  if #ms == 0 then break end
  -- This round's moves, applied with one ZREM and one ZADD before the next
  -- ZRANGE reads the index again.
  local moved, homes = {}, {}
  for _, m in ipairs(ms) do
    examined = examined + 1
    local id, k, f = check_entry('ready', m, repairs, true)
    local problem = id and unusable(f[2], f[3], f[4], true, type(f[5]) == 'string')
    if problem then
      -- Poison: moved aside, never leased (so never handed out unreturned).
      quarantine(m, id, k, 'ready', problem, repairs)
    elseif id then
      local token = ARGV[4 + n]
      local next_att = after[f[2]]
      if not next_att then
        local att = tonumber(f[2]) + 1
        next_att = { att, fmt_int(att) }
        after[f[2]] = next_att
      end
      local att = next_att[1]
      local enq_s = f[6] or ''
      local enq = enq_at[enq_s]
      if enq == nil then
        enq = int_field(enq_s, 0, ID_MAX) or false
        enq_at[enq_s] = enq
      end
      if enq then
        redis.call('HSET', k, 'st', 'leased', 'tok', token, 'due', exp_s, 'att', next_att[2])
      else
        enq = now
        redis.call('HSET', k, 'st', 'leased', 'tok', token, 'due', exp_s, 'att', next_att[2], 'enq', fmt_int(now))
      end
      moved[#moved + 1] = m
      homes[#homes + 1] = exp_s
      homes[#homes + 1] = m
      local b = n * 6
      leases[b + 1], leases[b + 2], leases[b + 3] = id, f[5], att
      -- Max attempts and priority go back as the item holds them (checked
      -- decimal integers): no number conversion for the reply.
      leases[b + 4], leases[b + 5], leases[b + 6] = f[3], f[4], exp - enq
      n = n + 1
    end
  end
  call_chunked('ZREM', K_READY, moved)
  zadd_batch(K_LEASED, homes)
  if examined >= budget and n < max then
    more = 1
    break
  end
end
return { leases, repairs, more, limits_done(n), exp }

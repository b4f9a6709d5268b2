-- enqueue_once: K_EXTRA = the request's key; ARGV[2] = how long to remember
-- the request (ms); from ARGV[3] what `enqueue` takes from ARGV[2] (the
-- registration, the id floor, n, the items).
-- Returns { 'unregistered', generation } as `enqueue` does (nothing
-- written, the request not stored), or { seen, results, note }: seen = 1
-- when the request was already
-- written (its stored results come back and nothing is written: this path
-- reads only, so it answers even on a server over `maxmemory`), else 0 and
-- the batch is written as `enqueue` writes it and its results are stored
-- under the request's key, with an expiry, in this same script; note as
-- `enqueue` returns it.
-- Results are stored as "id:dedup,id:dedup,..." and returned as `enqueue`
-- returns them (one signed id per item).
local K_REQ = K_EXTRA
local t = key_type(K_REQ)
if t == 'string' then
  local s = redis.call('GET', K_REQ)
  if (string.gsub(s, '%d+:[01],?', '')) ~= '' then
    return redis.error_reply('LEASEQ_CORRUPT key ' .. K_REQ .. ' holds no enqueue results')
  end
  local out, top = {}, 0
  for id, d in string.gmatch(s, '(%d+):([01])') do
    local n = tonumber(id)
    if n > top then top = n end
    if d == '1' then out[#out + 1] = -n else out[#out + 1] = n end
  end
  -- A record written before the queue was deleted names only ids at or
  -- below the queue's last one then (scripts/queue_delete.lua): the
  -- request is new, and its batch is written again.
  local deleted = int_field(redis.call('GET', K_DELETED), 0, ID_MAX)
  if not (deleted and top <= deleted) then return { 1, out, false } end
  redis.call('DEL', K_REQ)
elseif t ~= 'none' then
  return redis.error_reply('LEASEQ_CORRUPT key ' .. K_REQ .. ' holds a ' .. t .. ', expected a string')
end
local out, note = enqueue_batch(3)
if out.err then return out end
if out.unregistered then return { 'unregistered', out.unregistered } end
local parts = {}
for i, r in ipairs(out) do
  if r < 0 then parts[i] = fmt_int(-r) .. ':1' else parts[i] = fmt_int(r) .. ':0' end
end
redis.call('SET', K_REQ, table.concat(parts, ','), 'PX', ARGV[2])
return { 0, out, note or false }

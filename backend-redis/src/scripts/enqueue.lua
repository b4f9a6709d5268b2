-- enqueue: ARGV[2] = the client's registration token ('' = none), ARGV[3] =
-- its prune generation, ARGV[4] = the client's id floor, ARGV[5] = n, then
-- per item: payload, priority, delay ms, max attempts, dedup key ('' =
-- none), unique-for hold ms ('0' = none).
-- Returns { rows, note } with rows one signed id per item (negated when
-- the item was deduplicated; see scripts/enqueue_batch.lua), and note
-- false, or a text when the id counter was re-seeded; { false, note,
-- first id, n } for a batch of form 'f' given n consecutive ids; or
-- { 'unregistered', generation } when the queue must be registered first
-- (nothing written). (The batch is written by `enqueue_batch`,
-- scripts/enqueue_batch.lua.)
local out, note = enqueue_batch(2)
if out.err then return out end
if out.unregistered then return { 'unregistered', out.unregistered } end
-- A plain batch (no dedup key) of consecutive ids: its first id and size.
local n = #out
if ARGV[7] == 'f' and out[n] - out[1] == n - 1 then return { false, note or false, out[1], n } end
return { out, note or false }

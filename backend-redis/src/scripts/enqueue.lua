-- enqueue: ARGV[2] = the client's registration token ('' = none), ARGV[3] =
-- its prune generation, ARGV[4] = the client's id floor, ARGV[5] = n, then
-- per item: payload, priority, delay ms, max attempts, dedup key ('' =
-- none), unique-for hold ms ('0' = none).
-- Returns { rows, note } with rows one signed id per item (negated when
-- the item was deduplicated; see scripts/enqueue_batch.lua), and note
-- false, or a text when the id counter was re-seeded; or
-- { 'unregistered', generation } when the queue must be registered first
-- (nothing written). (The batch is written by `enqueue_batch`,
-- scripts/enqueue_batch.lua.)
local out, note = enqueue_batch(2)
if out.err then return out end
if out.unregistered then return { 'unregistered', out.unregistered } end
return { out, note or false }

-- enqueue: ARGV[2] = the client's id floor, ARGV[3] = n, then per item:
-- payload, priority, delay ms, max attempts, dedup key ('' = none), unique-for
-- hold ms ('0' = none).
-- Returns { rows, note } with per item { id, deduplicated (0/1) }, and note
-- false, or a text when the id counter was re-seeded. (The batch is written
-- by `enqueue_batch`, scripts/enqueue_batch.lua.)
local out, note = enqueue_batch(2)
if out.err then return out end
return { out, note or false }

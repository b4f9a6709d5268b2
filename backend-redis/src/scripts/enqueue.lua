-- enqueue: ARGV[2] = n, then per item: payload, priority, delay ms, max attempts, dedup key ('' = none).
-- Returns per item { id, deduplicated (0/1) }. (The batch is written by
-- `enqueue_batch`, scripts/enqueue_batch.lua.)
return enqueue_batch(2)

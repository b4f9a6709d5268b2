-- Rows the backend cannot use, found without walking the queue: a row whose
-- item is missing (payload NULL) or whose attempt counter is at the largest
-- value an integer holds, so a claim cannot add one. Claim moves such rows
-- aside (deletes the first, quarantines the second to Dead) through this
-- index. It is empty unless something went wrong, so keeping it costs a
-- predicate test per write.
CREATE INDEX leaseq_items_poison ON leaseq_items (queue, state)
    WHERE payload IS NULL OR attempts = 2147483647;

-- The core's limits, so nothing written around the backend holds what the
-- backend would refuse: a queue name of 1 to 128 bytes
-- (`QueueName::MAX_LEN`), a dedup key of 1 to 512 bytes
-- (`limits::MAX_DEDUP_KEY_LEN`), a failure reason of at most 4096 bytes
-- (`limits::MAX_REASON_LEN`). Byte lengths as the core counts them (UTF-8)
-- in a UTF8 database. `max_attempts` is already 1 to `limits::MAX_ATTEMPTS`
-- (`i32::MAX`) by its check and type, `attempts` 0 to `i32::MAX`. NOT VALID:
-- rows written before these checks existed are not scanned (nor refused);
-- every row written from now on is checked.
ALTER TABLE leaseq_items
    ADD CONSTRAINT leaseq_items_queue_len
        CHECK (octet_length(queue) BETWEEN 1 AND 128) NOT VALID,
    ADD CONSTRAINT leaseq_items_dedup_key_len
        CHECK (dedup_key IS NULL OR octet_length(dedup_key) BETWEEN 1 AND 512) NOT VALID,
    ADD CONSTRAINT leaseq_items_last_error_len
        CHECK (last_error IS NULL OR octet_length(last_error) <= 4096) NOT VALID;

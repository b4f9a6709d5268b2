-- A Ready or Scheduled row whose attempts already reached its maximum (a
-- row written around the backend, or one whose maximum was lowered) is
-- poison too: a claim would lease it on an attempt past its last one
-- (attempt 51 of 3). The poison index now holds such rows, so the claim
-- finds them without walking the queue and moves them to Dead ("attempts
-- exhausted") instead of leasing them. A counter at the largest integer is
-- also at or past any maximum, so the old predicate's second case is kept
-- only for the Leased and Dead rows it also covered (none of which a claim
-- reads). Leased rows on their final attempt and Dead rows stay out, so the
-- index stays empty unless something went wrong.
DROP INDEX leaseq_items_poison;
CREATE INDEX leaseq_items_poison ON leaseq_items (queue, state)
    WHERE payload IS NULL OR attempts = 2147483647
       OR (attempts >= max_attempts AND state IN ('ready', 'scheduled'));

-- queue_delete: the last step of `delete_queue` (src/delete.rs), after
-- purge batches emptied the indexes. K_EXTRA = the queue's limits hash;
-- ARGV[2] = the registry's id floor the client has raised, ARGV[3] = how
-- long the generation tombstone lives (ms), ARGV[4] = batch size. First
-- deletes up to a batch of entries per index, as purge does (items that
-- came in since the purge). Answers { items deleted, 'busy' } when the
-- indexes still hold entries (purge again); { items deleted, 'behind',
-- last id } when the queue handed out ids above the floor (raise it and
-- call again); else deletes every key of the queue (its limits hash
-- too, and with it a pause; its retention policy and kept items), raises the prune
-- generation on a tombstone that expires (a registration made before this
-- call no longer lets an enqueue in, see src/listing.rs), and answers
-- { items deleted, 'deleted', the token `listed` held ('' if none) }.
-- Records of `enqueue_once` requests expire on their own (`PX`); until
-- they do, `{p:q}:seq:deleted` holds the queue's last id (ARGV[5] = for
-- how long, ms): a record whose ids are all at or below it was written
-- before this delete, and enqueue_once treats its request as new.
local bad = guard_all()
if bad then return bad end
local deleted, left = purge_batch(tonumber(ARGV[4]))
if left > 0 then return { deleted, 'busy' } end
local seq = int_field(redis.call('GET', K_SEQ), 0, ID_MAX) or 0
local mark = int_field(redis.call('GET', K_MARK), 0, ID_MAX) or 0
local last = math.max(seq, mark)
if last > (int_field(ARGV[2], 0, ID_MAX) or 0) then return { deleted, 'behind', last } end
local token = redis.call('GET', K_LISTED) or ''
redis.call('DEL', K_SEQ, K_MARK, K_SEQ .. ':run', K_DSEQ, K_DEDUP, K_NOTIFY, K_HELD, K_HELD_ID, K_LISTED, K_EXTRA, K_TAKEN, K_TAKEN_FLOOR, QUEUE_TAG .. 'finished', K_CANCELS,
  K_COMPLETED)
redis.call('UNLINK', K_RET, K_RET_DEAD, K_DONE, K_DONE .. ':completed', K_DONE .. ':cancelled', K_ENDS)
if last > 0 then redis.call('SET', K_DELETED, fmt_int(last), 'PX', ARGV[5]) end
redis.call('INCR', K_LISTGEN)
redis.call('PEXPIRE', K_LISTGEN, ARGV[3])
return { deleted, 'deleted', token }

-- cancel: ARGV[2] = id (leaseq_core::Control::cancel). A Ready, Scheduled
-- or Dead item is deleted as remove_item deletes it (its dedup key freed,
-- no unique-for hold), kept Cancelled with its attempts when the queue's
-- policy keeps cancelled items: returns { 1, state } with the state it was in as
-- `item` shows it (a due Scheduled item is Ready). A Leased item (an
-- expired lease not yet reaped included) gets its lease's token recorded
-- in `cancel`, and whatever ends that lease ends the item Cancelled:
-- returns { 2 }, and an entry on the `cancels` stream wakes the workers'
-- cancel signal. No such item: { -1 }, nothing changed.
local bad = guard_all(K_DEDUP, K_DK, K_UF, K_CANCEL, K_PROG)
if bad then return bad end
local id = int_field(ARGV[2], 1, ID_MAX)
if not id then return { -1 } end
local id_s = fmt_int(id)
local state, due, token = state_of(id, id_s, member(id))
if not state then return { -1 } end
if token then
  redis.call('HSET', K_CANCEL, id_s, token)
  -- Tells the workers at once; the stream is a hint, kept short.
  redis.call('XADD', K_CANCELS, 'MAXLEN', '~', 64, '*', 'id', id_s)
  return { 2 }
end
local now = now_ms()
state = as_read(state, due, now)
local keep = retention()
if keep and keep.cancelled then keep_items(keep, { id_s }, true, 0, now) end
remove_item(id)
ev('cancelled', id_s)
ev_flush()
return { 1, state }

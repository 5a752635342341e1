-- The indexed claim with group affinity: $3 is the group whose message this worker has just
-- committed (in the same round trip), or null. Its new head is tried first: if it is still the
-- group's first pending message and no one holds it, the worker keeps the group, with no hand-off
-- to another worker. Only the head is ever locked, so a group whose head another worker holds is
-- left alone (its next message waits its turn), and otherwise the claim is the indexed one.
with recursive preferred as (
    select m.msg_id from msg_queue m
    where m.msg_id = (select min(h.msg_id) from msg_queue h
                      where h.queue_type = $1 and h.order_id = $3 and h.status = 'N')
      and m.status = 'N'
    for update skip locked
),
heads as (
    (select order_id, msg_id from msg_queue
      where queue_type = $1 and status = 'N'
      order by order_id, msg_id limit 1)
    union all
    select n.order_id, n.msg_id from heads h
    cross join lateral (
        select order_id, msg_id from msg_queue
        where queue_type = $1 and status = 'N' and order_id > h.order_id
        order by order_id, msg_id limit 1) n
),
next_msg as (
    -- the preferred head when it is free; the fallback runs only when it is not
    (select msg_id from preferred)
    union all
    (select locked.msg_id from heads h
     cross join lateral (
         select msg_id from msg_queue m
         where m.msg_id = h.msg_id and m.status = 'N'
         for update skip locked) locked
     limit $2)
    limit $2  -- the batch: up to $2 messages
)
update msg_queue mq
set status = 'P'
from next_msg
where mq.msg_id = next_msg.msg_id
returning mq.msg_id, mq.queue_type, mq.order_id

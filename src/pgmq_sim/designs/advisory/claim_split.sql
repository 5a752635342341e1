-- The advisory claim in its form for leases and retries: heads among pending and in-progress
-- messages; the group lock is tried only on a head that is pending and due.
with recursive heads as (
    (select order_id, msg_id from msg_queue
      where queue_type = $1 and status in ('N', 'I')
      order by order_id, msg_id limit 1)
    union all
    select n.order_id, n.msg_id from heads h
    cross join lateral (
        select order_id, msg_id from msg_queue
        where queue_type = $1 and status in ('N', 'I') and order_id > h.order_id
        order by order_id, msg_id limit 1) n
),
next_msg as (
    select h.msg_id from heads h
    join msg_queue m on m.msg_id = h.msg_id
    where m.status = 'N' and (m.next_attempt_at is null or m.next_attempt_at <= clock_timestamp())
      and pg_try_advisory_xact_lock(hashtext($1), h.order_id)
    limit $2  -- the batch: up to $2 messages
)
update msg_queue mq
set status = 'P'
from next_msg
where mq.msg_id = next_msg.msg_id and mq.status = 'N'
returning mq.msg_id, mq.queue_type, mq.order_id

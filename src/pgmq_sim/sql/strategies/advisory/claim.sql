-- Ordered claim guarded by a transaction-scoped advisory lock on the group key
-- (seed 003): a worker tries the group lock and moves on when it is taken,
-- never waiting on a row lock held by another worker.
with recursive heads as (
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
    select mq.msg_id from heads h join msg_queue mq on mq.msg_id = h.msg_id
    where mq.status = 'N' and pg_try_advisory_xact_lock(hashtext(mq.queue_type), mq.order_id)
    limit 1
    for update of mq
)
update msg_queue mq
set status = 'P'
from next_msg
where mq.msg_id = next_msg.msg_id
returning mq.msg_id, mq.queue_type, mq.order_id

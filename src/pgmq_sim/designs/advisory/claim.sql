-- Ordered claim guarded by a transaction-scoped advisory lock on the group key
-- (seed 003): walk the group heads and take the first group whose lock is free,
-- never waiting on a row lock held by another worker. The lock is tried on the
-- heads only (a filter over the CTE), never on rows a scan merely passes.
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
    select h.msg_id from heads h
    where pg_try_advisory_xact_lock(hashtext($1), h.order_id)
    limit $2  -- the batch: up to $2 messages
)
-- status is checked again on the current row: a head that committed after this
-- statement's snapshot is skipped rather than processed twice.
update msg_queue mq
set status = 'P'
from next_msg
where mq.msg_id = next_msg.msg_id and mq.status = 'N'
returning mq.msg_id, mq.queue_type, mq.order_id

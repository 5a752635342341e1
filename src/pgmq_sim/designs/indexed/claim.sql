-- The seed's ordering made index-driven: walk the pending head of each
-- (queue_type, order_id) group with a loose index scan and lock the first head
-- no other worker holds. Cost grows with the number of groups, not the backlog.
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
-- Each head is locked through a lookup by msg_id, so the plan stays an index
-- probe per group even before the table has statistics.
next_msg as (
    select locked.msg_id from heads h
    cross join lateral (
        select msg_id from msg_queue m
        where m.msg_id = h.msg_id and m.status = 'N'
        for update skip locked) locked
    limit $2  -- the batch: up to $2 messages
)
update msg_queue mq
set status = 'P'
from next_msg
where mq.msg_id = next_msg.msg_id
returning mq.msg_id, mq.queue_type, mq.order_id

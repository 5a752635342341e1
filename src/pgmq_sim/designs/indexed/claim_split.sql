-- The indexed claim in its form for leases and retries: heads are the first message of each
-- group still pending or in progress; a head in progress, or waiting for its next attempt,
-- keeps its group waiting.
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
    select locked.msg_id from heads h
    cross join lateral (
        select msg_id from msg_queue m
        where m.msg_id = h.msg_id and m.status = 'N'
          and (m.next_attempt_at is null or m.next_attempt_at <= clock_timestamp())
        for update skip locked) locked
    limit $2  -- the batch: up to $2 messages
)
update msg_queue mq
set status = 'P'
from next_msg
where mq.msg_id = next_msg.msg_id
returning mq.msg_id, mq.queue_type, mq.order_id

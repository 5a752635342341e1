-- pgmq-sim: unordered
-- The FIFO baseline with retries: the oldest pending message of the type that is due.
with next_msg as (
    select msg_id from msg_queue
    where queue_type = $1 and status = 'N'
      and (next_attempt_at is null or next_attempt_at <= clock_timestamp())
    order by msg_id
    limit $2  -- the batch: up to $2 messages
    for update skip locked
)
update msg_queue mq
set status = 'P'
from next_msg
where mq.msg_id = next_msg.msg_id
returning mq.msg_id, mq.queue_type, mq.order_id

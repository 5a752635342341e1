-- pgmq-sim: unordered
-- Plain SKIP LOCKED FIFO (seed 004): oldest pending message of the type, no
-- per-group ordering. The baseline the ordered strategies pay against.
with next_msg as (
    select msg_id from msg_queue
    where queue_type = $1 and status = 'N'
    order by msg_id
    limit $2  -- the batch: up to $2 messages
    for update skip locked
)
update msg_queue mq
set status = 'P'
from next_msg
where mq.msg_id = next_msg.msg_id
returning mq.msg_id, mq.queue_type, mq.order_id

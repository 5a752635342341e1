-- The seed's claim in its form for leases and retries (-tx split, -fail-rate): a message in
-- progress ('I') blocks its group as a pending one does, a dead letter ('D') no longer
-- does, and a head waiting for its next attempt keeps its group waiting (head-of-line).
with next_msg as (
    select msg_id from msg_queue mq
    where
        queue_type = $1
        and status = 'N'
        and (next_attempt_at is null or next_attempt_at <= clock_timestamp())
        and not exists (select 1 from msg_queue
            where
                queue_type = mq.queue_type
                and order_id = mq.order_id
                and status in ('N', 'I')
                and msg_id != mq.msg_id
                and time_added <= mq.time_added)
    limit 1
    for update skip locked
)
update msg_queue mq
set status = 'P'
from next_msg
where mq.msg_id = next_msg.msg_id
returning mq.msg_id, mq.queue_type, mq.order_id

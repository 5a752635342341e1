-- pgmq's read, ordered per group: up to $2 heads of type $1 (each group's first message still in
-- the queue) that are visible, hidden for $5 seconds (the visibility timeout) and returned. The read
-- commits: no lock is held while the message is worked, and a group whose head is in flight is
-- skipped, so its next message waits. Once the timeout passes the head is visible again: a worker
-- slower than the timeout sees its message delivered a second time.
with recursive heads as (
    (select order_id, msg_id from q_messages
      where queue_type = $1
      order by order_id, msg_id limit 1)
    union all
    select n.order_id, n.msg_id from heads h
    cross join lateral (
        select order_id, msg_id from q_messages
        where queue_type = $1 and order_id > h.order_id
        order by order_id, msg_id limit 1) n
),
visible as (
    select locked.msg_id from heads h
    cross join lateral (
        select msg_id from q_messages m
        where m.msg_id = h.msg_id and m.vt <= clock_timestamp()
        for update skip locked) locked
    limit $2
)
update q_messages m
set vt = clock_timestamp() + make_interval(secs => $5), read_ct = read_ct + 1
from visible
where m.msg_id = visible.msg_id
returning m.msg_id, m.queue_type, m.order_id

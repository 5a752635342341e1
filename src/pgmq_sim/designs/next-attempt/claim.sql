-- Up to $2 messages of type $1, each its group's head (the first unfinished message), locked with
-- SKIP LOCKED and only when its next attempt is due: a head waiting for its retry keeps its group
-- waiting. The attempt is counted here, in the claim's transaction.
with recursive heads as (
    (select order_id, id from queue_message
      where queue_type = $1 and next_attempt_time is not null
      order by order_id, id limit 1)
    union all
    select n.order_id, n.id from heads h
    cross join lateral (
        select order_id, id from queue_message
        where queue_type = $1 and next_attempt_time is not null and order_id > h.order_id
        order by order_id, id limit 1) n
),
due as (
    select locked.id from heads h
    cross join lateral (
        select id from queue_message m
        where m.id = h.id and m.next_attempt_time <= clock_timestamp()
        for update skip locked) locked
    limit $2
)
update queue_message m
set try_count = try_count + 1, last_attempt_time = clock_timestamp()
from due
where m.id = due.id
returning m.id as msg_id, m.queue_type, m.order_id

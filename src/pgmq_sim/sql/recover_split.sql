-- $1: seconds without a heartbeat after which an owner is gone. Messages in progress whose owner
-- is gone (its token's heartbeat stopped: the worker, its connection or its process died) or whose
-- lease expired (a worker alive but stuck) go back to pending; the attempt they used stays counted.
-- Returned: each message, the owner it had, and whether its lease had expired.
with gone as (
    select q.msg_id, q.owner, q.lease_until < clock_timestamp() as expired
    from msg_queue q
    where q.status = 'I'
      and (q.lease_until < clock_timestamp()
           or not exists (select 1 from pgmq_sim_owners o
                          where o.owner = q.owner
                            and o.beat_at > clock_timestamp() - make_interval(secs => $1)))
    for update of q skip locked
)
update msg_queue q
set status = 'N', owner = null, lease_until = null
from gone
where q.msg_id = gone.msg_id
returning q.msg_id, gone.owner, gone.expired

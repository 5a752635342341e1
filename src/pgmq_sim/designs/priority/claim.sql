-- Up to $2 tasks of type $1, highest priority first among those ready (due, and their group's head:
-- no earlier task of the group unfinished), leased to the worker ($4) for $5 seconds. The claim
-- commits: the work holds no lock, the lease says who has it.
with picked as (
    select t.id from task t
    where t.queue_type = $1 and t.state = 'new' and t.not_before <= clock_timestamp()
      and not exists (select 1 from task e
                      where e.queue_type = t.queue_type and e.order_id = t.order_id
                        and e.state in ('new', 'running') and e.id < t.id)
    order by t.priority desc, t.not_before, t.id
    limit $2
    for update skip locked
)
update task t
set state = 'running', owner = $4, attempt = attempt + 1,
    lease_until = clock_timestamp() + make_interval(secs => $5)
from picked
where t.id = picked.id
returning t.id as msg_id, t.queue_type, t.order_id

-- $1: how many to show. A design whose group order is by priority, then enqueue order (procrastinate's
-- lock: `order = "priority"`), with priorities in the run: a violation is a message claimed while
-- another of its group was still running (claimed before the one claimed before it completed), or
-- claimed while a message of its group that comes first in that order (a higher priority, or the
-- same and enqueued earlier) had landed before the group was free (before the previous message's
-- completion, or the claim for the group's first) and was claimed after it. Columns as
-- audit_violations.sql's. (audit_priority_overtakings.sql counts what that order promises.)
with first as (
    select distinct on (j.msg_id) j.msg_id, j.queue_type, j.order_id, j.worker, j.claimed_at,
           j.completed_at, e.priority, e.time_added
    from msg_journal j join pgmq_sim_enqueued e on e.msg_id = j.msg_id
    order by j.msg_id, j.completed_at
),
run as (
    select *, lag(completed_at) over w as prev_completed_at, lag(msg_id) over w as prev_msg_id,
           lag(worker) over w as prev_worker
    from first
    window w as (partition by queue_type, order_id order by claimed_at, msg_id)
),
together as (
    select queue_type, order_id, msg_id, prev_msg_id, worker, prev_worker,
           extract(epoch from prev_completed_at - claimed_at)::float8 as early_s, false as overtook
    from run
    where prev_msg_id is not null and claimed_at < prev_completed_at
),
passed_over as (
    select distinct on (m.msg_id) m.queue_type, m.order_id, m.msg_id, p.msg_id, m.worker, p.worker,
           extract(epoch from p.claimed_at - m.claimed_at)::float8, true
    from run m join run p on p.queue_type = m.queue_type and p.order_id = m.order_id
    where p.claimed_at > m.claimed_at
      and (p.priority > m.priority or (p.priority = m.priority and p.msg_id < m.msg_id))
      and p.time_added < coalesce(m.prev_completed_at, m.claimed_at)
    order by m.msg_id, p.msg_id
),
violations as (
    select * from together union all select * from passed_over
)
select v.*, count(*) filter (where v.overtook) over ()
from violations v
order by v.msg_id limit $1

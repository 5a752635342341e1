-- $1: how many to show. The first order violations (as audit_order.sql finds them), with the group,
-- both messages' workers, how long before the previous message's completion the next was claimed,
-- whether the next was claimed before the previous one was (it overtook a message still pending,
-- rather than one in flight), and how many of all the violations did so.
with first as (
    select distinct on (msg_id) msg_id, queue_type, order_id, worker, claimed_at, completed_at
    from msg_journal
    order by msg_id, completed_at
),
ordered as (
    select queue_type, order_id, msg_id, claimed_at, worker, completed_at,
           lag(completed_at) over w as prev_completed_at, lag(msg_id) over w as prev_msg_id,
           lag(worker) over w as prev_worker, lag(claimed_at) over w as prev_claimed_at
    from first
    window w as (partition by queue_type, order_id order by msg_id)
)
select queue_type, order_id, msg_id, prev_msg_id, worker, prev_worker,
       extract(epoch from prev_completed_at - claimed_at)::float8,
       claimed_at < prev_claimed_at,
       count(*) filter (where claimed_at < prev_claimed_at) over ()
from ordered
where prev_msg_id is not null and claimed_at < prev_completed_at
  and not (worker = prev_worker and claimed_at = prev_claimed_at and completed_at >= prev_completed_at)
order by msg_id limit $1

-- $1: how many messages to show; $2: the lease of an at-least-once design (null: exactly once), as
-- audit_counts_log.sql reads it. For the first messages completed more than once, not as a redelivery: each completion's
-- worker, and whether a claim came while an earlier claim of the message was still open (claimed
-- before the earlier one completed: two transactions held the message at once, so the claim's lock
-- did not keep the second out), and the gap between the first two claims.
with j as (
    select msg_id, claimed_at,
           lag(claimed_at - make_interval(secs => coalesce(claim_s, 0))) over w as earlier_claim
    from msg_journal
    window w as (partition by msg_id order by claimed_at, completed_at)
),
twice as (
    select distinct msg_id from j
    where earlier_claim is not null
      and not ($2::float8 is not null and claimed_at >= earlier_claim + make_interval(secs => $2::float8))
    order by msg_id limit $1
),
rows as (
    select j.msg_id, j.worker, j.claimed_at, j.completed_at,
           lag(j.completed_at) over w as earlier_completed,
           lag(j.claimed_at) over w as earlier_claimed
    from msg_journal j join twice t on t.msg_id = j.msg_id
    window w as (partition by j.msg_id order by j.claimed_at, j.completed_at)
)
select msg_id, array_agg(worker order by claimed_at),
       bool_or(claimed_at < earlier_completed),
       coalesce(extract(epoch from min(claimed_at - earlier_claimed)), 0)::float8
from rows group by msg_id order by msg_id

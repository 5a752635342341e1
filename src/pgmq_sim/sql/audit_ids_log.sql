-- $1: highest msg_id produced, $2: the lease of an at-least-once design (null: exactly once),
-- $3: how many ids to list per kind. The ids behind each count of audit_counts_log.sql, with the
-- same temporary table `pending_messages(msg_id)`.
with j as (
    select msg_id, claimed_at, completed_at, due_at,
           row_number() over w as nth, lag(claimed_at - make_interval(secs => coalesce(claim_s, 0))) over w as earlier_claim
    from msg_journal
    window w as (partition by msg_id order by claimed_at, completed_at)
),
extra as (
    select msg_id, ($2::float8 is not null
                    and claimed_at >= earlier_claim + make_interval(secs => $2::float8)) as redelivery
    from j where nth > 1
)
select 'duplicate', msg_id from (select distinct msg_id from extra where not redelivery order by msg_id limit $3) d
union all
select 'redelivered', msg_id from (select distinct msg_id from extra where redelivery order by msg_id limit $3) r
union all
select 'early', msg_id from (select distinct msg_id from j where due_at is not null and completed_at < due_at
                             order by msg_id limit $3) e
union all
select 'missing', msg_id from (
    select e.msg_id from pgmq_sim_enqueued e
    where e.msg_id <= $1
      and not exists (select 1 from msg_journal x where x.msg_id = e.msg_id)
      and not exists (select 1 from msg_failures f where f.msg_id = e.msg_id and f.dead)
      and not exists (select 1 from pending_messages p where p.msg_id = e.msg_id)
    order by e.msg_id limit $3) m

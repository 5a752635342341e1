-- The audit of a design of its own folder, from the tool's own tables: its log of enqueues, its
-- journal of completions, its record of failures; the temporary table `pending_messages(msg_id)` is
-- the design's pending.sql (or, without one, every enqueued message not finished). $1: highest msg_id produced;
-- $2: the design's lease in seconds when it delivers at least once (null: exactly once).
-- A second completion whose claim came after the first claim's lease had passed is a redelivery
-- (the design's own trade-off, counted and named); any other is a duplicate. The lease is counted
-- from the first claim's arrival on the server (claimed_at less claim_s): its statement set the
-- lease somewhere between that arrival and claimed_at, the clock read after it.
with j as (
    select msg_id, claimed_at, completed_at, due_at,
           row_number() over w as nth,
           lag(claimed_at - make_interval(secs => coalesce(claim_s, 0))) over w as earlier_claim
    from msg_journal
    window w as (partition by msg_id order by claimed_at, completed_at)
),
extra as (
    select msg_id, ($2::float8 is not null
                    and claimed_at >= earlier_claim + make_interval(secs => $2::float8)) as redelivery
    from j where nth > 1
),
dead as (
    select distinct msg_id from msg_failures f
    where f.dead and not exists (select 1 from msg_journal x where x.msg_id = f.msg_id)
)
select
    (select count(distinct msg_id) from msg_journal) as processed,
    (select count(*) from extra where not redelivery) as duplicates,
    (select count(*) from pgmq_sim_enqueued e
        where e.msg_id <= $1
          and not exists (select 1 from msg_journal x where x.msg_id = e.msg_id)
          and not exists (select 1 from dead d where d.msg_id = e.msg_id)
          and not exists (select 1 from pending_messages p where p.msg_id = e.msg_id)) as missing,
    (select count(*) from pgmq_sim_enqueued e
        where exists (select 1 from pending_messages p where p.msg_id = e.msg_id)
          and not exists (select 1 from msg_journal x where x.msg_id = e.msg_id)) as left_behind,
    (select count(*) from dead) as dead_lettered,
    (select count(*) from extra where redelivery) as redelivered,
    (select count(*) from msg_journal) + (select count(*) from msg_failures) as attempts,
    (select count(*) from msg_failures) as failed_attempts,
    (select count(*) from j where j.due_at is not null and j.completed_at < j.due_at) as early

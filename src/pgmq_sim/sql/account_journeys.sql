-- $1: whether the design keeps order per group (then every done message is read: each holds its
-- group from its first claim to its completion or dead letter; else only the cohorts'). The latency
-- account's journeys, by type (code point order) and msg_id: enqueued, due, claimed (the claim that completed
-- it) and when that claim statement arrived at the server (null: not measured), completed (its
-- first completion) or made a dead letter, when its commit was over (its worker's next claim
-- arrived, or its worker was free from then: the next journal row of that worker says which; null:
-- none), its failed attempts before, and its cohorts by the time from enqueue to completion: about the median (the middle 2%, at least the one
-- or two nearest it) and the slowest 1% (at least one), of its type and of the whole run. Times are
-- seconds from the run's first enqueue.
with rows as (
    select *, claimed_at - make_interval(secs => claim_s) as claim_from
    from msg_journal
    where time_added is not null
),
first as (
    select distinct on (msg_id) msg_id, queue_type, order_id, claimed_at, completed_at, time_added, due_at,
           claim_from, lead(coalesce(claimed_at - make_interval(secs => free_s), claim_from))
                           over (partition by worker order by claimed_at) as committed
    from rows
    order by msg_id, completed_at
),
base as (select min(time_added) as t0 from msg_journal),
ranked as (
    select f.*,
           row_number() over (partition by f.queue_type order by f.completed_at - f.time_added, f.msg_id) as tr,
           count(*) over (partition by f.queue_type) as tn,
           row_number() over (order by f.completed_at - f.time_added, f.msg_id) as rr,
           count(*) over () as rn
    from first f
),
marked as (
    select msg_id, queue_type, order_id, time_added, due_at, claimed_at, completed_at, claim_from, committed,
           case when tr > floor(0.99 * tn) then 'p99'
                when tr between floor((tn + 1) / 2.0 - tn / 100.0) and ceil((tn + 1) / 2.0 + tn / 100.0)
                then 'median' end as type_cohort,
           case when rr > floor(0.99 * rn) then 'p99'
                when rr between floor((rn + 1) / 2.0 - rn / 100.0) and ceil((rn + 1) / 2.0 + rn / 100.0)
                then 'median' end as run_cohort
    from ranked
),
attempts as (  -- each message's failed attempts before its first completion (a dead letter's: all)
    select x.msg_id, min(x.claimed_at) as first_claimed,
           array_agg(extract(epoch from x.claimed_at - b.t0)::float8 order by x.attempt) as claimed,
           array_agg(extract(epoch from x.failed_at - b.t0)::float8 order by x.attempt) as failed,
           array_agg(extract(epoch from x.next_attempt_at - b.t0)::float8 order by x.attempt) as next_at
    from msg_failures x
    cross join base b
    left join first f on f.msg_id = x.msg_id
    where f.completed_at is null or x.failed_at <= f.completed_at
    group by x.msg_id
),
journeys as (
    select * from marked where $1 or type_cohort is not null or run_cohort is not null
    union all
    select d.msg_id, d.queue_type, d.order_id, null, null, null, d.failed_at, null, null, null, null
    from msg_failures d where d.dead and $1
)
select j.msg_id, j.queue_type, j.order_id, j.type_cohort, j.run_cohort,
       extract(epoch from coalesce(j.time_added, a.first_claimed) - b.t0)::float8,
       extract(epoch from j.due_at - b.t0)::float8,
       extract(epoch from j.claimed_at - b.t0)::float8,
       extract(epoch from j.completed_at - b.t0)::float8,
       extract(epoch from j.claim_from - b.t0)::float8,
       extract(epoch from j.committed - b.t0)::float8,
       a.claimed, a.failed, a.next_at
from journeys j
cross join base b
left join attempts a on a.msg_id = j.msg_id
order by j.queue_type collate "C", j.msg_id

-- $1: whether the design keeps order per group (then every done message is read: each holds its
-- group from its first claim to its completion or dead letter; else only the cohorts'); $2 the
-- types, $3, $4 and $5 each one's median cohort's first and last bucket and its slowest 1%'s first,
-- $6 the run's three (sql/account_cohorts.sql, model/journeys.cohort_bounds).
-- The latency account's journeys, by type (code point order) and by when they were claimed (a dead
-- letter: when it was made one), so everything that held a message's group before its claim is
-- read before it, whatever order the design keeps (a priority, a due time): enqueued, due, claimed
-- (the claim that completed it) and when that claim statement arrived at the server (null: not
-- measured), completed (its first completion) or made a dead letter, when its commit was over (its
-- worker's next claim arrived, or its worker was free from then: the next journal row of that
-- worker says which; null: none), its failed attempts before, and its cohorts by the time from
-- enqueue to completion: about the median (the middle 2%, at least the one or two nearest it) and
-- the slowest 1% (at least one), of its type and of the whole run, to a bucket's 0.1%; and the
-- earliest enqueue of it and of every journey of its type read after it (the account forgets what
-- ended before). Times are seconds from the run's first enqueue.
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
bounds as (  -- each type's cohorts' buckets, and the run's ($6: median from, median to, p99 from)
    select * from unnest($2::text[], $3::int[], $4::int[], $5::int[]) as b(queue_type, median_lo, median_hi, p99_lo)
),
marked as (
    select f.msg_id, f.queue_type, f.order_id, f.time_added, f.due_at, f.claimed_at, f.completed_at, f.claim_from,
           f.committed,
           case when x.bucket >= t.p99_lo then 'p99'
                when x.bucket between t.median_lo and t.median_hi then 'median' end as type_cohort,
           case when x.bucket >= ($6::int[])[3] then 'p99'
                when x.bucket between ($6::int[])[1] and ($6::int[])[2] then 'median' end as run_cohort
    from first f
    cross join lateral (
        select floor(ln(greatest(extract(epoch from f.completed_at - f.time_added)::float8, 1e-6)) / ln(1.001))::int
               as bucket
    ) x
    left join bounds t on t.queue_type = f.queue_type
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
select j.msg_id, j.queue_type, j.order_id, j.type_cohort, j.run_cohort, x.added,
       extract(epoch from j.due_at - b.t0)::float8,
       extract(epoch from j.claimed_at - b.t0)::float8,
       extract(epoch from j.completed_at - b.t0)::float8,
       extract(epoch from j.claim_from - b.t0)::float8,
       extract(epoch from j.committed - b.t0)::float8,
       min(x.added) over (partition by j.queue_type order by coalesce(j.claimed_at, j.completed_at) desc,
                          j.msg_id desc rows unbounded preceding),
       a.claimed, a.failed, a.next_at
from journeys j
cross join base b
left join attempts a on a.msg_id = j.msg_id
cross join lateral (
    select extract(epoch from coalesce(j.time_added, a.first_claimed) - b.t0)::float8 as added
) x
order by j.queue_type collate "C", coalesce(j.claimed_at, j.completed_at), j.msg_id

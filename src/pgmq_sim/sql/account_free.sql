-- $1 the workers free when the run stopped, $2 their types. When at least one worker of each type
-- was free, as spans in seconds from the run's first enqueue: a worker is free from the start of
-- the empty claim (or the wait, or the lost connection) that ended its last message until the claim
-- that took its next (its journal row's free_s before claimed_at; a failed attempt's row likewise),
-- and a worker free at the end from its last completion on (if it had none, from the run's first
-- claim: the workers were up by then, not before, while a prefill went in). The spans of a type's
-- workers are merged where they overlap.
with base as (
    select min(time_added) as t0, max(completed_at) as t1,
           min(claimed_at - make_interval(secs => coalesce(claim_s, 0))) as up
    from msg_journal where time_added is not null
),
last_done as (
    select worker, max(t) as t
    from (select worker, completed_at as t from msg_journal
          union all select worker, failed_at from msg_failures) x
    group by worker
),
episodes as (
    select queue_type, claimed_at - make_interval(secs => free_s) as a, claimed_at as b
    from msg_journal where free_s is not null
    union all
    select queue_type, claimed_at - make_interval(secs => free_s), claimed_at
    from msg_failures where free_s is not null
    union all
    select w.queue_type, coalesce(d.t, b.up), b.t1
    from unnest($1::text[], $2::text[]) as w(worker, queue_type)
    cross join base b
    left join last_done d on d.worker = w.worker
),
ordered as (
    select queue_type, a, b,
           max(b) over (partition by queue_type order by a, b
                        rows between unbounded preceding and 1 preceding) as reach
    from episodes
    where b > a
),
islands as (
    select queue_type, a, b,
           count(*) filter (where reach is null or a > reach) over (partition by queue_type order by a, b) as island
    from ordered
)
select i.queue_type, extract(epoch from min(i.a) - b.t0)::float8, extract(epoch from max(i.b) - b.t0)::float8
from islands i cross join base b
group by i.queue_type, i.island, b.t0
order by i.queue_type collate "C", 2

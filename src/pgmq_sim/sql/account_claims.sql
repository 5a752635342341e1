-- When a claim statement of each type that took a message was running (from its arrival at the
-- server to its locks: the journal's claim_s before claimed_at), as spans in seconds from the run's
-- first enqueue, the spans of a type's claims merged where they overlap. Claims that came back
-- empty are not journaled, so not here.
with base as (select min(time_added) as t0 from msg_journal where time_added is not null),
episodes as (
    select distinct queue_type, claimed_at - make_interval(secs => claim_s) as a, claimed_at as b
    from msg_journal
    where claim_s > 0
),
ordered as (
    select queue_type, a, b,
           max(b) over (partition by queue_type order by a, b
                        rows between unbounded preceding and 1 preceding) as reach
    from episodes
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

-- $1 the account's zero (the server's epoch), $2 and $3 the chunk's bounds (epochs; $3 null: on to the
-- journal's end, where $4 the workers free when the run stopped and $5 their types are free from
-- their last completion on, as sql/account_free.sql says). When at least one worker of each type was
-- free within the chunk, as sql/account_free.sql reads it for the whole run, each episode cut to the
-- chunk: free time is a measure, so the chunks' pieces add up to the whole run's. An episode ends at
-- a claim, so those in the chunk are in the rows claimed from its start on; the first chunk begins at
-- the zero ($2 = $1), and a worker free at the end with no completion since a later chunk's start was
-- free from before it.
with base as (
    select max(completed_at) as t1,
           min(claimed_at - make_interval(secs => coalesce(claim_s, 0))) as up
    from msg_journal where time_added is not null and claimed_at >= to_timestamp($2)
),
last_done as (
    select worker, max(t) as t
    from (select worker, completed_at as t from msg_journal where claimed_at >= to_timestamp($2)
          union all select worker, failed_at from msg_failures where claimed_at >= to_timestamp($2)) x
    group by worker
),
episodes as (
    select queue_type, claimed_at - make_interval(secs => free_s) as a, claimed_at as b
    from msg_journal where free_s is not null and claimed_at >= to_timestamp($2)
      and ($3::float8 is null or claimed_at - make_interval(secs => free_s) < to_timestamp($3))
    union all
    select queue_type, claimed_at - make_interval(secs => free_s), claimed_at
    from msg_failures where free_s is not null and claimed_at >= to_timestamp($2)
      and ($3::float8 is null or claimed_at - make_interval(secs => free_s) < to_timestamp($3))
    union all
    select w.queue_type,
           coalesce(d.t, case when $2 <= $1 then b.up else to_timestamp($2) end), b.t1
    from unnest($4::text[], $5::text[]) as w(worker, queue_type)
    cross join base b
    left join last_done d on d.worker = w.worker
    where $3::float8 is null
),
cut as (
    select queue_type, greatest(a, to_timestamp($2)) as a,
           case when $3::float8 is null then b else least(b, to_timestamp($3)) end as b
    from episodes
),
ordered as (
    select queue_type, a, b,
           max(b) over (partition by queue_type order by a, b
                        rows between unbounded preceding and 1 preceding) as reach
    from cut
    where b > a
),
islands as (
    select queue_type, a, b,
           count(*) filter (where reach is null or a > reach) over (partition by queue_type order by a, b) as island
    from ordered
)
select queue_type, extract(epoch from min(a))::float8 - $1, extract(epoch from max(b))::float8 - $1
from islands
group by queue_type, island
order by queue_type collate "C", 2

-- $1 the account's zero (the server's epoch), $2 and $3 the chunk's bounds (epochs; $3 null: on to the
-- journal's end). When a claim statement of each type that took a message was running within the
-- chunk, as sql/account_claims.sql reads it for the whole run, each cut to the chunk.
with episodes as (
    select distinct queue_type, greatest(claimed_at - make_interval(secs => claim_s), to_timestamp($2)) as a,
           case when $3::float8 is null then claimed_at else least(claimed_at, to_timestamp($3)) end as b
    from msg_journal
    where claim_s > 0 and claimed_at >= to_timestamp($2)
      and ($3::float8 is null or claimed_at - make_interval(secs => claim_s) < to_timestamp($3))
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
select queue_type, extract(epoch from min(a))::float8 - $1, extract(epoch from max(b))::float8 - $1
from islands
group by queue_type, island
order by queue_type collate "C", 2

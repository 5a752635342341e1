-- $1 the run's first enqueue (the server's epoch: the account's zero), $2 and $3 the chunk's bounds
-- (epochs; $3 null: on to the journal's end). The latency account's journeys claimed in the chunk
-- (a dead letter: made one in it), as sql/account_journeys.sql reads the whole journal's, by type
-- (code point order) and claim, each with the bucket of its time from enqueue to completion (0.1%
-- wide on a log scale, as sql/account_cohorts.sql counts them) in place of its cohorts, which the
-- account picks by bucket at the end; its commit read from its worker's next row, which may be
-- past the chunk (only that row is read of the rest of the journal); its horizon the earliest
-- enqueue of it and of the chunk's journeys after it.
with next as (  -- each worker's first row past the chunk: when its last commit in the chunk was over
    select worker, min(claimed_at) as claimed_at
    from msg_journal
    where time_added is not null and claimed_at >= to_timestamp($3)
    group by worker
),
rows as (  -- the chunk's rows and those (the rest of the journal is not sorted at each read)
    select *, claimed_at - make_interval(secs => claim_s) as claim_from
    from msg_journal
    where time_added is not null and claimed_at >= to_timestamp($2)
      and ($3::float8 is null or claimed_at < to_timestamp($3))
    union all
    select j.*, j.claimed_at - make_interval(secs => j.claim_s)
    from msg_journal j join next n using (worker, claimed_at)
    where j.time_added is not null and j.claimed_at >= to_timestamp($3)
      and j.claimed_at <= (select max(claimed_at) from next)
),
first as (
    select distinct on (msg_id) msg_id, queue_type, order_id, claimed_at, completed_at, time_added, due_at,
           claim_from, lead(coalesce(claimed_at - make_interval(secs => free_s), claim_from))
                           over (partition by worker order by claimed_at) as committed
    from rows
    order by msg_id, completed_at
),
chunk as (
    select * from first where $3::float8 is null or claimed_at < to_timestamp($3)
),
attempts as (  -- each message's failed attempts before its first completion (a dead letter's: all)
    select x.msg_id, min(x.claimed_at) as first_claimed,
           array_agg(extract(epoch from x.claimed_at)::float8 - $1 order by x.attempt) as claimed,
           array_agg(extract(epoch from x.failed_at)::float8 - $1 order by x.attempt) as failed,
           array_agg(extract(epoch from x.next_attempt_at)::float8 - $1 order by x.attempt) as next_at
    from msg_failures x
    left join chunk f on f.msg_id = x.msg_id
    where (f.msg_id is not null and x.failed_at <= f.completed_at)
       or x.msg_id in (select d.msg_id from msg_failures d where d.dead and d.failed_at >= to_timestamp($2)
                       and ($3::float8 is null or d.failed_at < to_timestamp($3)))
    group by x.msg_id
),
journeys as (
    select c.msg_id, c.queue_type, c.order_id, c.time_added, c.due_at, c.claimed_at, c.completed_at, c.claim_from,
           c.committed,
           floor(ln(greatest(extract(epoch from c.completed_at - c.time_added)::float8, 1e-6)) / ln(1.001))::int
               as bucket
    from chunk c
    union all
    select d.msg_id, d.queue_type, d.order_id, null, null, null, d.failed_at, null, null, null
    from msg_failures d
    where d.dead and d.failed_at >= to_timestamp($2) and ($3::float8 is null or d.failed_at < to_timestamp($3))
)
select j.msg_id, j.queue_type, j.order_id, j.bucket, x.added,
       extract(epoch from j.due_at)::float8 - $1,
       extract(epoch from j.claimed_at)::float8 - $1,
       extract(epoch from j.completed_at)::float8 - $1,
       extract(epoch from j.claim_from)::float8 - $1,
       extract(epoch from j.committed)::float8 - $1,
       min(x.added) over (partition by j.queue_type order by coalesce(j.claimed_at, j.completed_at) desc,
                          j.msg_id desc rows unbounded preceding),
       a.claimed, a.failed, a.next_at
from journeys j
left join attempts a on a.msg_id = j.msg_id
cross join lateral (
    select extract(epoch from coalesce(j.time_added, a.first_claimed))::float8 - $1 as added
) x
order by j.queue_type collate "C", coalesce(j.claimed_at, j.completed_at), j.msg_id

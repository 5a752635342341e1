-- The rows' own facts behind a folder design's order violations (as audit_order.sql finds them),
-- from the tool's log of what it enqueued: for each pair (a group's earlier message, and the later
-- one claimed before that one completed), whether the claim returned the later one first (it
-- overtook), whether the later one's design id sorts before the earlier's (numerically when both
-- are integers, else as text), was due earlier or ranked higher, and how far apart the two were
-- enqueued. The design id is read through to_jsonb: a design that keeps the tool's ids has none.
with first as (
    select distinct on (msg_id) msg_id, queue_type, order_id, worker, claimed_at, completed_at
    from msg_journal
    order by msg_id, completed_at
),
ordered as (
    select msg_id, claimed_at, worker, completed_at,
           lag(completed_at) over w as prev_completed_at, lag(msg_id) over w as prev_msg_id,
           lag(worker) over w as prev_worker, lag(claimed_at) over w as prev_claimed_at
    from first
    window w as (partition by queue_type, order_id order by msg_id)
),
pairs as (
    select o.msg_id, o.prev_msg_id, o.claimed_at < o.prev_claimed_at as overtook,
           to_jsonb(e) ->> 'design_id' as id, to_jsonb(p) ->> 'design_id' as prev_id,
           e.due_at < p.due_at as due_earlier, e.priority > p.priority as ranked_higher,
           date_trunc('milliseconds', e.time_added) = date_trunc('milliseconds', p.time_added) as same_ms,
           extract(epoch from e.time_added - p.time_added)::float8 * 1000 as apart_ms
    from ordered o
    join pgmq_sim_enqueued e on e.msg_id = o.msg_id
    join pgmq_sim_enqueued p on p.msg_id = o.prev_msg_id
    where o.prev_msg_id is not null and o.claimed_at < o.prev_completed_at
      and not (o.worker = o.prev_worker and o.claimed_at = o.prev_claimed_at
               and o.completed_at >= o.prev_completed_at)
),
judged as (
    select *, case when id ~ '^-?[0-9]+$' and prev_id ~ '^-?[0-9]+$' then id::numeric < prev_id::numeric
                   else id < prev_id end as inverted
    from pairs
)
select count(*)::int,
       count(*) filter (where overtook)::int,
       bool_or(id is not null),
       count(*) filter (where inverted)::int,
       count(*) filter (where inverted and same_ms)::int,
       coalesce(max(apart_ms) filter (where inverted), 0),
       count(*) filter (where due_earlier)::int,
       count(*) filter (where ranked_higher)::int,
       (array_agg(array[msg_id::text, id, prev_msg_id::text, prev_id] order by msg_id)
            filter (where inverted))[1:1]
from judged

-- pgmq-sim: function (text, text, bigint, text, timestamptz, text, int, float8, float8) returns table (attempt_no int, is_dead boolean, retry_at timestamptz)
-- failure_entry.sql for a design of its own ids: $1 is the design's id (its text), mapped to the
-- tool's message number by its log of what it enqueued; $9 how long the worker was free before the
-- claim (null: not).
with m as (select msg_id from pgmq_sim_enqueued where design_id = $1),
attempt as (select count(*)::int + 1 as n from msg_failures where msg_id = (select msg_id from m))
insert into msg_failures (msg_id, queue_type, order_id, attempt, worker, claimed_at, failed_at,
                          next_attempt_at, dead, error, free_s)
select (select msg_id from m), $2, $3, n, $4, $5, clock_timestamp(),
       case when n >= $7 then null else clock_timestamp() + make_interval(secs => $8 * power(2, n - 1) / 1000.0) end,
       n >= $7, $6, $9
from attempt
returning attempt, dead, next_attempt_at

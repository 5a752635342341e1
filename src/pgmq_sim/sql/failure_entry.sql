-- pgmq-sim: function (bigint, text, bigint, text, timestamptz, text, int, float8, float8) returns table (attempt_no int, is_dead boolean, retry_at timestamptz)
-- $1 msg_id, $2 queue_type, $3 order_id, $4 worker, $5 claimed_at, $6 error, $7 max attempts,
-- $8 backoff base in ms, $9 how long the worker was free before the claim (null: not).
-- A folder design's failed attempt, in the tool's own record: which attempt it was (one more than
-- those recorded), whether it was the last (a dead letter), and when the next may run
-- (base x 2^(attempt-1)); the design's fail.sql then records it in its own table.
with attempt as (select count(*)::int + 1 as n from msg_failures where msg_id = $1)
insert into msg_failures (msg_id, queue_type, order_id, attempt, worker, claimed_at, failed_at,
                          next_attempt_at, dead, error, free_s)
select $1, $2, $3, n, $4, $5, clock_timestamp(),
       case when n >= $7 then null else clock_timestamp() + make_interval(secs => $8 * power(2, n - 1) / 1000.0) end,
       n >= $7, $6, $9
from attempt
returning attempt, dead, next_attempt_at

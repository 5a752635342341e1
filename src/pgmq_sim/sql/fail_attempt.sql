-- pgmq-sim: function (bigint, text, timestamptz, text, int, float8, text, float8) returns table (is_dead boolean)
-- $1 msg_id, $2 worker, $3 claimed_at, $4 error, $5 max attempts, $6 backoff base in ms,
-- $7 owner (null in single mode, where the claim's row lock is still held), $8 how long the worker
-- was free before the claim (null: not).
-- The next attempt waits base x 2^(attempt-1); after the last attempt the message is a
-- dead letter, which no longer blocks its group. The failure is recorded either way.
with failed as (
    update msg_queue
    set status = case when attempts >= $5 then 'D' else 'N' end,
        owner = null, lease_until = null, last_error = $4,
        next_attempt_at = case when attempts >= $5 then null
            else clock_timestamp() + make_interval(secs => $6 * power(2, attempts - 1) / 1000.0) end
    where msg_id = $1 and ($7::text is null or (status = 'I' and owner = $7))
    returning msg_id, queue_type, order_id, attempts, next_attempt_at, status = 'D' as dead
)
insert into msg_failures (msg_id, queue_type, order_id, attempt, worker, claimed_at, failed_at,
                          next_attempt_at, dead, error, free_s)
select msg_id, queue_type, order_id, attempts, $2, $3, clock_timestamp(), next_attempt_at, dead, $4, $8
from failed
returning dead

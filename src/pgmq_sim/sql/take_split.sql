-- pgmq-sim: function (bigint, text, float8) returns table (attempt_no int)
-- $1 msg_id, $2 owner (the worker's token, 'wN:xxxxxxxx'), $3 lease in seconds. Committed with the claim:
-- the message is in progress, owned, until its completion, its failure or its recovery.
update msg_queue
set status = 'I', attempts = attempts + 1, owner = $2,
    lease_until = clock_timestamp() + make_interval(secs => $3)
where msg_id = $1
returning attempts

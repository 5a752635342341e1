-- pgmq-sim: function (bigint, text, bigint, text, timestamptz, int, float8, float8) returns table (completed_at timestamptz)
-- $1 msg_id, $2 queue_type, $3 order_id, $4 worker, $5 claimed_at, $6 attempt, $7 how long the worker
-- was free before the claim (null: not), $8 how long the claim statement that took it ran, on the
-- server's clock (null: not measured).
-- The audit's journal: a statement of its own before the completion, in its transaction, so that
-- the server's per-statement statistics show what the audit costs apart from what the queue costs.
-- The row is written even if the message is gone, so a message processed twice shows up twice.
insert into msg_journal (msg_id, queue_type, order_id, worker, claimed_at, completed_at, time_added, attempt, free_s, claim_s)
values ($1, $2, $3, $4, $5, clock_timestamp(), (select time_added from msg_queue where msg_id = $1), $6, $7, $8)
returning completed_at

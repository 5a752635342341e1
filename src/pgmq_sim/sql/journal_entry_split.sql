-- pgmq-sim: function (bigint, text, bigint, text, timestamptz, int, text, float8, float8) returns table (completed_at timestamptz)
-- $1 msg_id, $2 queue_type, $3 order_id, $4 worker, $5 claimed_at, $6 attempt, $7 owner, $8 how long
-- the worker was free before the claim (null: not), $9 how long the claim
-- statement that took it ran, on the server's clock (null: not measured).
-- The audit's journal, as journal_entry.sql, for a message this worker still owns only: a worker
-- whose lease expired, or whose session died, writes nothing. The row is locked until the
-- completion that follows in the same transaction, so recovery cannot take it in between.
insert into msg_journal (msg_id, queue_type, order_id, worker, claimed_at, completed_at, time_added, attempt, free_s, claim_s)
select $1, $2, $3, $4, $5, clock_timestamp(), q.time_added, $6, $8, $9
from (select time_added from msg_queue where msg_id = $1 and status = 'I' and owner = $7 for update) q
returning completed_at

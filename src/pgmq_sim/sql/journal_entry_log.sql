-- pgmq-sim: function (bigint, text, bigint, text, timestamptz, int, float8, float8) returns table (completed_at timestamptz, added_at timestamptz)
-- $1 msg_id, $2 queue_type, $3 order_id, $4 worker, $5 claimed_at ($6, the attempt, is counted here),
-- $7 how long the worker was free before the claim (null: not), $8 how long
-- the claim statement that took it ran, on the server's clock (null: not measured).
-- The audit's journal for a design of its own folder: the message's enqueue time and due time come
-- from the tool's log of what it enqueued (its table is the design's, unknown to the tool); the
-- attempt is one more than the failures the tool recorded. Returned: the commit's clock and the time
-- its end-to-end latency counts from (its due time, when it had one).
insert into msg_journal (msg_id, queue_type, order_id, worker, claimed_at, completed_at, time_added, due_at, attempt,
                         free_s, claim_s)
select $1, $2, $3, $4, $5, clock_timestamp(), e.time_added, e.due_at,
       1 + (select count(*) from msg_failures f where f.msg_id = $1)::int, $7, $8
from (select 1) one left join pgmq_sim_enqueued e on e.msg_id = $1
returning completed_at, greatest(time_added, due_at)

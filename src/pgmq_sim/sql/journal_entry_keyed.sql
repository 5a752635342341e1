-- pgmq-sim: function (text, text, bigint, text, timestamptz, int, float8, float8) returns table (completed_at timestamptz, added_at timestamptz, msg_id bigint)
-- $1 the design's own id (its text), $2 queue_type, $3 order_id, $4 worker, $5 claimed_at ($6, the
-- attempt, is counted here), $7 how long the worker was free before the claim (null: not),
-- $8 how long the claim statement that took it ran, on the server's clock (null: not measured).
-- journal_entry_log.sql for a design whose enqueue returns its own id: the
-- tool's message number is found in its log of what it enqueued (pgmq_sim_enqueued.design_id), so the
-- journal keeps the tool's number and the audit and the latency read it as for every design.
insert into msg_journal (msg_id, queue_type, order_id, worker, claimed_at, completed_at, time_added, due_at, attempt,
                         free_s, claim_s)
select e.msg_id, $2, $3, $4, $5, clock_timestamp(), e.time_added, e.due_at,
       1 + (select count(*) from msg_failures f where f.msg_id = e.msg_id)::int, $7, $8
from (select 1) one left join pgmq_sim_enqueued e on e.design_id = $1
returning completed_at, greatest(time_added, due_at), msg_id

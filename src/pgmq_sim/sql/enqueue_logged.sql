-- pgmq-sim: function (bigint, text, bigint, integer, timestamptz, timestamptz) returns void
-- $1 msg_id, $2 queue_type, $3 order_id, $4 priority, $5 enqueued at, $6 due at: the tool's row for
-- one message enqueued into a design of its own folder, in the enqueue's transaction.
insert into pgmq_sim_enqueued (msg_id, queue_type, order_id, priority, time_added, due_at)
values ($1, $2, $3, $4, $5, $6)

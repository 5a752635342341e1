-- pgmq-sim: function (bigint, text, bigint, integer, timestamptz, timestamptz, text) returns void
-- enqueue_logged.sql for a design of its own ids: $7 the id its enqueue returned (as text), in the
-- enqueue's transaction; the tool's message number ($1) is what its journal and audit count.
insert into pgmq_sim_enqueued (msg_id, queue_type, order_id, priority, time_added, due_at, design_id)
values ($1, $2, $3, $4, $5, $6, $7)

-- Messages produced into a design of its own folder: the tool's log of enqueues commits with each
-- (msg_ids are consecutive and the producer never passes one in doubt).
select greatest((select produced from pgmq_sim_run), (select max(msg_id) from pgmq_sim_enqueued))

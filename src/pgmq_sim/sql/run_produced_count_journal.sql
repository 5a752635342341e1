-- As run_produced_count.sql, with the journal: a message processed and deleted is there.
select greatest((select produced from pgmq_sim_run), (select max(msg_id) from msg_queue),
                (select max(msg_id) from msg_journal))

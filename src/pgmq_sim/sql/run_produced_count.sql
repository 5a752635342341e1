-- Messages produced: the count the producer last recorded, or the highest msg_id in the queue when
-- that is higher (msg_ids are consecutive and the producer never passes one in doubt, so every
-- lower one landed too): exact after a run that was killed between two recordings.
select greatest((select produced from pgmq_sim_run), (select max(msg_id) from msg_queue))

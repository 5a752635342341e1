-- The event done (TYPE:ev_id); no row when it was done already (delivered again after its lease
-- passed, and completed by the other worker first). The batch is finished by the claim that finds
-- every event of it done.
update pgmq_sim_pgq_events set done = true
where queue_type = split_part($1, ':', 1) and ev_id = split_part($1, ':', 2)::bigint and not done

-- How many of the closed windows' carried messages were lost since (window_carried_missing.sql).
select count(*) from pgmq_sim_carried c
where c.msg_id <= current_setting('pgmq_sim.window_lo')::bigint
  and not exists (select 1 from msg_journal j where j.msg_id = c.msg_id)
  and not exists (select 1 from msg_queue q where q.msg_id = c.msg_id)

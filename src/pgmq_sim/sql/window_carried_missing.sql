-- $1: how many to list. The messages the closed windows carried (pending then) that are neither
-- pending now nor journaled nor dead-lettered: lost since (the seed's table; window_views_seed.sql).
select c.msg_id from pgmq_sim_carried c
where c.msg_id <= current_setting('pgmq_sim.window_lo')::bigint
  and not exists (select 1 from msg_journal j where j.msg_id = c.msg_id)
  and not exists (select 1 from msg_queue q where q.msg_id = c.msg_id)
order by c.msg_id limit $1

-- The seed table's rows of the live audit's window (window_views.sql).
create temporary view msg_queue as
select * from msg_queue
where msg_id > current_setting('pgmq_sim.window_from')::bigint
  and msg_id <= current_setting('pgmq_sim.window_hi')::bigint
  and (msg_id > current_setting('pgmq_sim.window_lo')::bigint
       or msg_id in (select c.msg_id from pgmq_sim_carried c))

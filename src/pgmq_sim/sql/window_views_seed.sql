-- The seed table's rows of the live audit's window (window_views.sql).
create temporary view msg_queue as
select * from msg_queue
where msg_id > current_setting('pgmq_sim.window_lo')::bigint
  and msg_id <= current_setting('pgmq_sim.window_hi')::bigint

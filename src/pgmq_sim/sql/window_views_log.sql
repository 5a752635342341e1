-- The tool's log of enqueues, its rows of the live audit's window (window_views.sql).
create temporary view pgmq_sim_enqueued as
select * from pgmq_sim_enqueued
where msg_id > current_setting('pgmq_sim.window_from')::bigint
  and msg_id <= current_setting('pgmq_sim.window_hi')::bigint
  and (msg_id > current_setting('pgmq_sim.window_lo')::bigint
       or msg_id in (select c.msg_id from pgmq_sim_carried c))

-- The live audit's window: in this transaction the tool's tables stand for their rows of msg_ids
-- pgmq_sim.window_lo+1 .. pgmq_sim.window_hi and of the messages the closed windows carried (still
-- pending when they closed; none below pgmq_sim.window_from), so the run's audit statements judge a
-- window as they judge a run. With pgmq_sim.window_marks on, the journal holds, before the window's rows,
-- each group's last completed message of the closed windows: per-group order across windows.
-- The views bind the real tables when made; they last as long as the session.
create temporary view msg_journal as
select * from msg_journal
where msg_id > current_setting('pgmq_sim.window_from')::bigint
  and msg_id <= current_setting('pgmq_sim.window_hi')::bigint
  and (msg_id > current_setting('pgmq_sim.window_lo')::bigint
       or msg_id in (select c.msg_id from pgmq_sim_carried c))
union all
select * from pgmq_sim_marks where current_setting('pgmq_sim.window_marks') = 'on';
create temporary view msg_failures as
select * from msg_failures
where msg_id > current_setting('pgmq_sim.window_from')::bigint
  and msg_id <= current_setting('pgmq_sim.window_hi')::bigint
  and (msg_id > current_setting('pgmq_sim.window_lo')::bigint
       or msg_id in (select c.msg_id from pgmq_sim_carried c))

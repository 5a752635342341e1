-- The live audit's views (window_views*.sql), gone before its transaction ends.
drop view if exists pg_temp.msg_journal, pg_temp.msg_failures, pg_temp.msg_queue, pg_temp.pgmq_sim_enqueued

-- The live audit's views (window_views*.sql), dropped before its transaction ends where a
-- transaction pooler would hand its server connection, views and all, to another client.
drop view if exists pg_temp.msg_journal, pg_temp.msg_failures, pg_temp.msg_queue, pg_temp.pgmq_sim_enqueued

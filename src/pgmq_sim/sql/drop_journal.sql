drop table if exists msg_journal;
drop table if exists pgmq_sim_windows;
drop table if exists pgmq_sim_marks;
drop table if exists pgmq_sim_carried

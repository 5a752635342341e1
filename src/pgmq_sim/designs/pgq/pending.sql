-- Unfinished: events not done, in a batch taken or not yet in one.
select id from pgmq_sim_pgq_pending() id

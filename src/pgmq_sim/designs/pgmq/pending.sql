-- Unfinished: every message still in a queue (visible, or hidden while it is worked).
select id from pgmq_sim_pgmq_pending() id

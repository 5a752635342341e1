-- The lowest msg_id a window may hold: its first, or the lowest carried to it.
select least($1::bigint, (select min(msg_id) - 1 from pgmq_sim_carried))

-- The last window's carried messages, gone before the window that judged them carries its own.
delete from pgmq_sim_carried

select produced from pgmq_sim_run

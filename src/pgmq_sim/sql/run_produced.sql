-- Raised in the producer's transaction, with the batch it counts.
update pgmq_sim_run set produced = $1

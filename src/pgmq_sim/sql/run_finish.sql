update pgmq_sim_run set finished_at = clock_timestamp(), outcome = $1, produced = greatest(produced, $2)

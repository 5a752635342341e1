-- $1 run_id, $2 target, $3 ordered, $4 audited, $5 settings
insert into pgmq_sim_run (run_id, target, ordered, audited, settings) values ($1, $2, $3, $4, $5)

-- pgqueuer's enqueue (in schema.sql's pgmq_sim_pgqueuer_enqueue); pgqueuer assigns the id.
select pgmq_sim_pgqueuer_enqueue($1, $2, $3, $4, $5, $6) as msg_id

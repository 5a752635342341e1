-- The type's share of its consumer's batch, in PL/pgSQL (schema.sql's pgmq_sim_pgq_claim): $1 the
-- type, $2 how many events at most, $4 the worker's owner token, $5 the lease in seconds.
select msg_id, queue_type, order_id from pgmq_sim_pgq_claim($1, $2, $4, $5)

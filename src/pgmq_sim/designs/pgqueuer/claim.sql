-- pgqueuer's dequeue (schema.sql's pgmq_sim_pgqueuer_dequeue): $1 the type, $2 the batch, $4 the
-- worker's owner token (its queue manager), $5 the heartbeat timeout. The dequeue commits.
select id as msg_id, entrypoint as queue_type, (headers ->> 'order_id')::bigint as order_id
from pgmq_sim_pgqueuer_dequeue($1, $2, $4, $5)

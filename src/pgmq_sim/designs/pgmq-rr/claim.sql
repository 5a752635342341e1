-- pgmq.read_grouped_rr: up to $2 messages of queue $1, FIFO within each x-pgmq-group and the groups
-- interleaved (round-robin), hidden for the lease ($5 seconds). The read commits.
select $1 || ':' || m.msg_id as msg_id, $1 as queue_type, (m.headers ->> 'x-pgmq-group')::bigint as order_id
from pgmq.read_grouped_rr($1, ceil($5)::integer, $2) m

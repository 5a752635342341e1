-- pgmq.read: the oldest $2 visible messages of queue $1, no per-group order, hidden for the lease
-- ($5 seconds). The read commits.
select $1 || ':' || m.msg_id as msg_id, $1 as queue_type, (m.headers ->> 'x-pgmq-group')::bigint as order_id
from pgmq.read($1, ceil($5)::integer, $2) m

-- pgmq.read_grouped: up to $2 messages of queue $1, FIFO within each x-pgmq-group, hidden for the
-- lease ($5 seconds, pgmq's visibility timeout, whole seconds). The read commits.
select $1 || ':' || m.msg_id as msg_id, $1 as queue_type, (m.headers ->> 'x-pgmq-group')::bigint as order_id
from pgmq.read_grouped($1, ceil($5)::integer, $2) m

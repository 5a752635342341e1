-- The seed's enqueue with -payload-bytes: as enqueue.sql, and $6 the payload (a schema without a
-- payload column is refused before the run).
insert into msg_queue (msg_id, queue_type, status, order_id, time_added, payload)
values ($1, $2, 'N', $3, $5, $6)

-- An application's enqueue: one message, one statement, a transaction of its own.
-- $1 msg_id, $2 queue_type, $3 order_id, $5 the enqueue time (the seed's table has no priority, $4,
-- nor a due time: its time_added is the enqueue time). The Go tool's table has no payload column:
-- enqueue_payload.sql, with $6, is used only with -payload-bytes.
insert into msg_queue (msg_id, queue_type, status, order_id, time_added)
values ($1, $2, 'N', $3, $5)

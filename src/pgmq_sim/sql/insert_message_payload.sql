-- An application's enqueue with a payload: one message, one statement, a transaction of its own.
insert into msg_queue (msg_id, queue_type, status, order_id, time_added, payload)
values ($1, $2, $3, $4, $5, $6)

-- pgmq's send: $1 msg_id, $2 queue_type, $3 order_id, $5 visible from (a delay), $6 the message.
insert into q_messages (msg_id, queue_type, order_id, vt, message) values ($1, $2, $3, $5, $6)

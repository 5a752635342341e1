-- $1 id, $2 queue_type, $3 order_id, $5 the first attempt's time (a delayed first attempt), $6 payload.
insert into queue_message (id, queue_type, order_id, next_attempt_time, payload) values ($1, $2, $3, $5, $6)

-- $1 id, $2 queue_type, $3 order_id, $4 priority, $5 not before, $6 payload.
insert into task (id, queue_type, order_id, priority, not_before, payload) values ($1, $2, $3, $4, $5, $6)

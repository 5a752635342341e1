copy msg_queue (msg_id, queue_type, status, order_id, time_added, payload) from stdin

copy pgmq_sim_enqueued (msg_id, queue_type, order_id, priority, time_added, due_at) from stdin

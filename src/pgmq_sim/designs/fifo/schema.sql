create index msg_queue_pending_fifo on msg_queue (queue_type, msg_id) where status = 'N';

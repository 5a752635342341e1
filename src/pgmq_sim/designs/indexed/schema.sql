-- Pending rows by group in msg_id order: the head of every group is one index probe away.
create index msg_queue_pending_by_group on msg_queue (queue_type, order_id, msg_id) where status = 'N';

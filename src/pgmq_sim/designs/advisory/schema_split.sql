-- Unfinished rows by group in msg_id order: pending and in-progress heads are index probes.
create index msg_queue_unfinished_by_group on msg_queue (queue_type, order_id, msg_id)
    where status in ('N', 'I');

-- pgmq's archive (-archive): $1 msg_id moved to the archive table.
with moved as (delete from q_messages where msg_id = $1 returning *)
insert into a_messages (msg_id, queue_type, order_id, read_ct, enqueued_at, vt, message)
select msg_id, queue_type, order_id, read_ct, enqueued_at, vt, message from moved

-- pgmq's delete: $1 msg_id, gone (a message delivered twice is deleted once).
delete from q_messages where msg_id = $1

-- pgmq's delete (-delmsg): $1 msg_id, gone; the design's completion already deletes.
delete from q_messages where msg_id = $1

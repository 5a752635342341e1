-- pgmq.delete of the message (queue:msg_id); no row when it was already gone (a second delivery
-- completed after the first).
select deleted from pgmq.delete(split_part($1, ':', 1), split_part($1, ':', 2)::bigint) deleted where deleted

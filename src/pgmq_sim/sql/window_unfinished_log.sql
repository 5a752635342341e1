-- The lowest msg_id still pending (the temporary table pending_messages; null: none).
select min(msg_id) from pending_messages

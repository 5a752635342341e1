-- The window's messages still pending (the temporary table pending_messages, over the window's
-- views): carried to the next window in place of the last ones.
select p.msg_id from pending_messages p join pgmq_sim_enqueued e on e.msg_id = p.msg_id

-- Unfinished: every message still in the queue (visible, or hidden while it is worked).
select msg_id from q_messages

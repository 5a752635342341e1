-- How many messages the design's pending.sql listed (pending_messages, loaded by the tool).
select count(*) from pending_messages

-- Messages not completed: pending or claimed by an open transaction (marked rows have
-- time_processed, deleted rows are gone).
select count(*) from msg_queue where time_processed is null

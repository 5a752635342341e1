-- Messages not yet finished: pending, in progress or claimed by an open transaction (marked
-- rows have time_processed, deleted rows are gone, dead letters are finished too).
select count(*) from msg_queue where time_processed is null and status <> 'D'

-- $1 msg_id: did its completion commit? Asked after a connection died mid-commit. The
-- claim's own mark rolls back with its transaction; only a committed completion sets
-- time_processed (or deletes the row).
select exists (select 1 from msg_queue where msg_id = $1 and time_processed is not null)
    or not exists (select 1 from msg_queue where msg_id = $1)

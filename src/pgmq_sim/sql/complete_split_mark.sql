-- pgmq-sim: function (bigint, text) returns table (added_at timestamptz, done_at timestamptz)
-- $1 msg_id, $2 owner. Completes only a message this worker still owns.
update msg_queue set status = 'P', time_processed = clock_timestamp(), owner = null, lease_until = null
where msg_id = $1 and status = 'I' and owner = $2
returning time_added, clock_timestamp()

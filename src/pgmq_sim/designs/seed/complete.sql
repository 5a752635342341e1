-- pgmq-sim: function (bigint) returns table (added_at timestamptz, done_at timestamptz)
update msg_queue set status = 'P', time_processed = clock_timestamp() where msg_id = $1
returning time_added, clock_timestamp()

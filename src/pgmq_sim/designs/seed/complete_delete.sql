-- pgmq-sim: function (bigint) returns table (added_at timestamptz, done_at timestamptz)
delete from msg_queue where msg_id = $1 returning time_added, clock_timestamp()

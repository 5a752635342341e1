-- pgmq-sim: function (bigint, text) returns table (added_at timestamptz, done_at timestamptz)
-- $1 msg_id, $2 owner. Completes only a message this worker still owns.
delete from msg_queue where msg_id = $1 and status = 'I' and owner = $2
returning time_added, clock_timestamp()

-- pgmq-sim: function (bigint, text, bigint, text, timestamptz, int, text) returns table (added_at timestamptz, done_at timestamptz)
-- $1 msg_id, $2 queue_type, $3 order_id, $4 worker, $5 claimed_at, $6 attempt, $7 owner.
with done as (
    delete from msg_queue where msg_id = $1 and status = 'I' and owner = $7 returning time_added
)
insert into msg_journal (msg_id, queue_type, order_id, worker, claimed_at, completed_at, time_added, attempt)
select $1, $2, $3, $4, $5, clock_timestamp(), done.time_added, $6 from done
returning time_added, completed_at

-- pgmq-sim: function (bigint, text, bigint, text, timestamptz, int) returns table (added_at timestamptz, done_at timestamptz)
-- $1 msg_id, $2 queue_type, $3 order_id, $4 worker, $5 claimed_at, $6 attempt.
-- The journal row is written even if the completion found no row, so a
-- message processed twice shows up twice.
with done as (
    delete from msg_queue where msg_id = $1 returning time_added
)
insert into msg_journal (msg_id, queue_type, order_id, worker, claimed_at, completed_at, time_added, attempt)
values ($1, $2, $3, $4, $5, clock_timestamp(), (select time_added from done), $6)
returning time_added, completed_at

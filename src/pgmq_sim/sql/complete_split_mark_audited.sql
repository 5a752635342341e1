-- pgmq-sim: function (bigint, text, bigint, text, timestamptz, int, text) returns table (added_at timestamptz, done_at timestamptz)
-- $1 msg_id, $2 queue_type, $3 order_id, $4 worker, $5 claimed_at, $6 attempt, $7 owner.
-- Only a message this worker still owns is completed and journaled: a worker whose lease
-- expired, or whose session died, finds nothing and writes nothing.
with now as (select clock_timestamp() as at),
done as (
    update msg_queue set status = 'P', time_processed = (select at from now), owner = null,
                         lease_until = null
    where msg_id = $1 and status = 'I' and owner = $7
    returning time_added
)
insert into msg_journal (msg_id, queue_type, order_id, worker, claimed_at, completed_at, time_added, attempt)
select $1, $2, $3, $4, $5, (select at from now), done.time_added, $6 from done
returning time_added, completed_at

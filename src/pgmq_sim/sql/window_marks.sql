-- Each group's last completed message of the window being closed (its first completion), kept as
-- the mark the group's next message is checked against; window_marks is off, so msg_journal holds
-- the window's rows alone.
insert into pgmq_sim_marks
select distinct on (queue_type, order_id) *
from (select distinct on (msg_id) * from msg_journal order by msg_id, completed_at) first
order by queue_type, order_id, msg_id desc
on conflict (queue_type, order_id) do update
set msg_id = excluded.msg_id, worker = excluded.worker, claimed_at = excluded.claimed_at,
    completed_at = excluded.completed_at, time_added = excluded.time_added, due_at = excluded.due_at,
    attempt = excluded.attempt, free_s = excluded.free_s, claim_s = excluded.claim_s

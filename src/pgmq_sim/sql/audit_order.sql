-- A message claimed before the previous message of its (queue_type, order_id) group completed.
-- claimed_at is taken after the claim statement locked its row, completed_at before the completing
-- commit, so a correct run never trips this. A message's first completion is what the next waits
-- for (a second one, a redelivery, is the audit's other count); two messages of a group claimed
-- together by one worker in one claim (a batch) and completed in order are in order.
with first as (
    select distinct on (msg_id) msg_id, queue_type, order_id, worker, claimed_at, completed_at
    from msg_journal
    order by msg_id, completed_at
),
ordered as (
    select msg_id, claimed_at, worker, completed_at,
           lag(completed_at) over w as prev_completed_at,
           lag(msg_id) over w as prev_msg_id,
           lag(worker) over w as prev_worker,
           lag(claimed_at) over w as prev_claimed_at
    from first
    window w as (partition by queue_type, order_id order by msg_id)
)
select msg_id, prev_msg_id from ordered
where prev_msg_id is not null and claimed_at < prev_completed_at
  and not (worker = prev_worker and claimed_at = prev_claimed_at and completed_at >= prev_completed_at)
order by msg_id

-- A message claimed before the previous message of its (queue_type, order_id)
-- group completed. claimed_at is taken after the claim statement locked its row,
-- completed_at before the completing commit, so a correct run never trips this.
with ordered as (
    select msg_id, claimed_at,
           lag(completed_at) over w as prev_completed_at,
           lag(msg_id) over w as prev_msg_id
    from msg_journal
    window w as (partition by queue_type, order_id order by msg_id, completed_at)
)
select msg_id, prev_msg_id from ordered
where prev_msg_id is not null and prev_msg_id <> msg_id and claimed_at < prev_completed_at
order by msg_id

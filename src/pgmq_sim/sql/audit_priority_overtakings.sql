-- A design whose group order is by priority, then enqueue order: how many messages were claimed
-- before an earlier message of their group because their priority was higher, as that order
-- promises (the seed's contract, enqueue order alone, would call each a violation).
with first as (
    select distinct on (j.msg_id) j.msg_id, j.queue_type, j.order_id, j.claimed_at, e.priority
    from msg_journal j join pgmq_sim_enqueued e on e.msg_id = j.msg_id
    order by j.msg_id, j.completed_at
)
select count(*) from first m
where exists (select 1 from first p
              where p.queue_type = m.queue_type and p.order_id = m.order_id and p.msg_id < m.msg_id
                and p.claimed_at > m.claimed_at and m.priority > p.priority)

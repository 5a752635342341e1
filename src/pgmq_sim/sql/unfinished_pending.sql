-- Without the design's pending.sql, the audit's pending_messages: every message enqueued and neither
-- completed nor dead-lettered (left behind or lost: only the design's own table could tell them apart).
create temp table pending_messages (msg_id) on commit drop as
select e.msg_id from pgmq_sim_enqueued e
where not exists (select 1 from msg_journal j where j.msg_id = e.msg_id)
  and not exists (select 1 from msg_failures f where f.msg_id = e.msg_id and f.dead)

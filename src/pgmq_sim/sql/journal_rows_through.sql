-- The journal's rows of msg_ids 1..$1 not carried any more: the closed windows' rows, and any
-- completion of their messages after they closed.
select count(*) from msg_journal j
where j.msg_id <= $1 and not exists (select 1 from pgmq_sim_carried c where c.msg_id = j.msg_id)

-- Messages enqueued into a design of its own folder and not yet finished, from the tool's own tables:
-- enqueued, less those completed (the journal) and those dead-lettered (the failures).
select (select count(*) from pgmq_sim_enqueued)
     - (select count(distinct msg_id) from msg_journal)
     - (select count(distinct msg_id) from msg_failures f
         where f.dead and not exists (select 1 from msg_journal j where j.msg_id = f.msg_id))

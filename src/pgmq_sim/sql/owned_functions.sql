-- The functions a run may create (behind a transaction pooler: the pgmq_sim_* ones; with -wakeup
-- notify: the trigger's), whether one of that name exists, and whether every one of that name was
-- made by this tool.
select t.name, count(p.oid) > 0,
       bool_and(coalesce(obj_description(p.oid, 'pg_proc'), '') like 'pgmq-sim: %')
from unnest(array['pgmq_sim_claim', 'pgmq_sim_complete', 'pgmq_sim_take', 'pgmq_sim_fail', 'msg_queue_notify']) t(name)
left join pg_proc p on p.proname = t.name and p.pronamespace = current_schema()::regnamespace
group by t.name
order by t.name

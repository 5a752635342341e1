-- The tables a run would replace, whether they exist, and whether this tool made them.
select t.name, c.oid is not null,
       coalesce(obj_description(c.oid, 'pg_class') like 'pgmq-sim: %', false)
from unnest(array['msg_queue', 'msg_journal', 'msg_failures', 'pgmq_sim_owners', 'pgmq_sim_run', 'pgmq_sim_enqueued',
                  'pgmq_sim_bystander', 'pgmq_sim_windows', 'pgmq_sim_marks', 'pgmq_sim_carried']) t(name)
left join pg_class c on c.oid = to_regclass(t.name)
order by t.name

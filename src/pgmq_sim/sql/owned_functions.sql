-- $1: the functions a run may create (behind a transaction pooler: the pgmq_sim_* ones; with
-- -wakeup notify: the trigger's). Whether one of each name exists, and whether every one of that
-- name was made by this tool.
select t.name, count(p.oid) > 0,
       bool_and(coalesce(obj_description(p.oid, 'pg_proc'), '') like 'pgmq-sim: %')
from unnest($1::text[]) t(name)
left join pg_proc p on p.proname = t.name and p.pronamespace = current_schema()::regnamespace
group by t.name
order by t.name

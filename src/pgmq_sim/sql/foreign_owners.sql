-- $1: the tool's tables and functions a run would drop, change or call. Those that exist and that
-- the run's role cannot own (its owner is another role, not one this role is a member of: an
-- earlier run as a superuser made it), each with its owner and its kind.
select t.name, pg_get_userbyid(c.relowner)::text, 'table'
from unnest($1::text[]) t(name)
join pg_class c on c.oid = to_regclass(t.name)
where not pg_has_role(c.relowner, 'MEMBER')
union all
select distinct p.proname::text, pg_get_userbyid(p.proowner)::text, 'function'
from pg_proc p
where p.proname = any($1) and p.pronamespace = current_schema()::regnamespace
  and not pg_has_role(p.proowner, 'MEMBER')
order by 1

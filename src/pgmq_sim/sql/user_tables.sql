-- Every table outside the system schemas (schema-qualified), and whether this tool created it: a
-- design's schema is run in a transaction that is rolled back, and what it created or dropped is
-- read from the catalog before and after. A schema an extension made is the extension's storage
-- (PgQ's event tables, made and dropped by its own functions, owned by the extension's owner):
-- not listed; the design's own tables say whose its queues are.
select c.oid, n.nspname || '.' || c.relname,
       coalesce(obj_description(c.oid, 'pg_class') like 'pgmq-sim: %', false)
from pg_class c join pg_namespace n on n.oid = c.relnamespace
where c.relkind in ('r', 'p')
  and n.nspname not in ('pg_catalog', 'information_schema') and n.nspname !~ '^pg_(toast|temp)'
  and not exists (select 1 from pg_depend d
                  where d.classid = 'pg_namespace'::regclass and d.objid = n.oid
                    and d.refclassid = 'pg_extension'::regclass and d.deptype = 'e')

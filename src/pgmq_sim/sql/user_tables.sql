-- Every table outside the system schemas (schema-qualified), and whether this tool created it: a
-- design's schema is run in a transaction that is rolled back, and what it created or dropped is
-- read from the catalog before and after.
select c.oid, n.nspname || '.' || c.relname,
       coalesce(obj_description(c.oid, 'pg_class') like 'pgmq-sim: %', false)
from pg_class c join pg_namespace n on n.oid = c.relnamespace
where c.relkind in ('r', 'p')
  and n.nspname not in ('pg_catalog', 'information_schema') and n.nspname !~ '^pg_(toast|temp)'

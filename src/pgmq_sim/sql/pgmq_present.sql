-- pgmq in this database: the extension's version (if installed), the schema pgmq's comment (the
-- tool marks the SQL it installed), and whether that schema exists.
select (select extversion from pg_extension where extname = 'pgmq'),
       obj_description(n.oid, 'pg_namespace'),
       n.oid is not null
from (select 1) one left join pg_namespace n on n.nspname = 'pgmq'

-- $1: the settings' names; $2: the queue's tables. The settings that shape a queue as this session
-- has them and where each was set (sourcefile and sourceline show only to roles that may read them),
-- with the role and database they hold for; then each queue table's own options (reloptions: an
-- autovacuum_enabled=false, a fillfactor) and its triggers (each statement on it runs them: their
-- writes are the queue's cost), one row per table with the setting's columns null.
select name, current_setting(name), source, sourcefile, sourceline, null::text[], null::text[],
       current_user::text, current_database()::text
from pg_settings
where name = any($1)
union all
select n, null, null, null, null, coalesce(c.reloptions, '{}'),
       array(select t.tgname::text from pg_trigger t where t.tgrelid = c.oid and not t.tgisinternal
             order by t.tgname), null, null
from unnest($2::text[]) n join pg_class c on c.oid = to_regclass(n)

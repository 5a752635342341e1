-- $1: the timeouts' names, read as server_timeouts.sql reads them, in a transaction whose own
-- statement_timeout is set locally (the role's was too short for the read itself): each as this
-- session started (reset_val), and where it was set, from the role's and the database's settings
-- (pg_db_role_setting: the role in the database, the role, the database, in that precedence);
-- else the configuration file where it is not the default (the file is not named: the local
-- setting hides it).
select s.name, s.reset_val::bigint, s.unit, s.reset_val,
       coalesce((select case when d.setrole <> 0 and d.setdatabase <> 0 then 'database user'
                             when d.setrole <> 0 then 'user' else 'database' end
                 from pg_db_role_setting d
                 where not (d.setrole = 0 and d.setdatabase = 0)
                   and d.setrole in (0, (select oid from pg_roles where rolname = current_user))
                   and d.setdatabase in (0, (select oid from pg_database where datname = current_database()))
                   and exists (select 1 from unnest(d.setconfig) c where c like s.name || '=%')
                 order by d.setrole <> 0 and d.setdatabase <> 0 desc, d.setrole <> 0 desc
                 limit 1),
                case when s.reset_val = s.boot_val then 'default' else 'configuration file' end),
       null::text, null::int, current_user::text, current_database()::text
from pg_settings s
where s.name = any($1)
order by s.name

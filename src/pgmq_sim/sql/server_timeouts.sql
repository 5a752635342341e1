-- $1: the timeouts' names. Each as this session has it (from its role, its database and the
-- server) and where it was set; sourcefile and sourceline show only to roles that may read them
-- (a superuser, pg_read_all_settings). transaction_timeout exists from PostgreSQL 17.
select name, setting::bigint, unit, current_setting(name), source, sourcefile, sourceline,
       current_user::text, current_database()::text
from pg_settings
where name = any($1)
order by name

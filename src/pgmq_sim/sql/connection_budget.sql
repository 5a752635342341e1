-- What this run may still open: the server's limit less the slots reserved for superusers
-- (and for pg_use_reserved_connections, PostgreSQL 16+) unless the role may use them, less
-- the sessions open now (a plain role sees other roles' sessions without their backend_type: a
-- session with a database and a role is a client's), this one left out (it closes before the run opens
-- its own); and the role's own limit less its sessions.
select current_setting('max_connections')::int
       - case when r.rolsuper then 0
              else current_setting('superuser_reserved_connections')::int
                   + coalesce(nullif(current_setting('reserved_connections', true), '')::int, 0) end
       - (select count(*) from pg_stat_activity
          where pid <> pg_backend_pid()
            and (backend_type = 'client backend' or (backend_type is null and datname is not null and usename is not null)))::int,
       case when r.rolconnlimit < 0 then null
            else r.rolconnlimit - (select count(*) from pg_stat_activity
                                    where usename = current_user and backend_type = 'client backend'
                                      and pid <> pg_backend_pid())::int end
from pg_roles r where r.rolname = current_user

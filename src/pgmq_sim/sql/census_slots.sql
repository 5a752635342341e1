-- Who holds the server's connection slots: client sessions by application and role, this one left
-- out. A plain role sees other roles' sessions only by pid, role, database and application (their
-- backend_type is hidden): a session with a database and a role is a client's (an autovacuum
-- worker has no role). With this role, and whether it
-- sees all (one row with a count of 0 when no other session is open).
select coalesce(a.application_name, ''), coalesce(a.usename::text, ''), count(a.pid)::int,
       count(a.pid) filter (where a.backend_type is null)::int, me.role, me.sees_all
from (select current_user::text as role, pg_has_role(current_user, 'pg_read_all_stats', 'usage') as sees_all) me
left join pg_stat_activity a
       on a.pid <> pg_backend_pid()
      and (a.backend_type = 'client backend' or (a.backend_type is null and a.datname is not null and a.usename is not null))
group by 1, 2, me.role, me.sees_all
order by 3 desc, 1, 2

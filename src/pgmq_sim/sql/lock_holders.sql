-- $1: our own backend pids. Sessions that hold a transaction open elsewhere.
select pid, coalesce(application_name, ''), coalesce(state, ''),
       coalesce(extract(epoch from clock_timestamp() - xact_start), 0)::float8,
       coalesce(backend_xid::text, ''), left(coalesce(query, ''), 80)
from pg_stat_activity
where xact_start is not null and pid <> pg_backend_pid() and not (pid = any($1))
order by xact_start

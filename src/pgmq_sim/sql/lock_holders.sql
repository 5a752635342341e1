-- $1: this run's worker pids. Every other session with a transaction open, and ours, with the
-- address it connects from (a pooler's server connections come from the pooler).
select pid, coalesce(application_name, ''), coalesce(state, ''),
       coalesce(extract(epoch from clock_timestamp() - xact_start), 0)::float8,
       coalesce(backend_xid::text, ''), left(coalesce(query, ''), 80), pid = any($1) as ours,
       coalesce(host(client_addr), '')
from pg_stat_activity
where (xact_start is not null or pid = any($1)) and pid <> pg_backend_pid()
order by xact_start

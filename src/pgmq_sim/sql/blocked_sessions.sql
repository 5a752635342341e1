-- $1: this run's worker pids. Who blocks them (a table lock, a row lock waited on); a session of
-- another role shows no state or query to a role without pg_read_all_stats.
select w.pid, b.pid, coalesce(b.application_name, ''), coalesce(b.state, ''),
       coalesce(extract(epoch from now() - b.xact_start), 0)::float8,
       left(coalesce(b.query, ''), 80), coalesce(host(b.client_addr), '')
from pg_stat_activity w
cross join lateral unnest(pg_blocking_pids(w.pid)) as blocker(pid)
join pg_stat_activity b on b.pid = blocker.pid
where w.pid = any($1)
order by b.pid, w.pid

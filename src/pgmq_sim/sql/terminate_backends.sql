-- $1: pids to end (a fault the run injects into itself). Returns how many were ended.
select count(*) filter (where pg_terminate_backend(pid)) from unnest($1::int[]) as t(pid)

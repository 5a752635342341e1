-- $1: pids to end (a fault the run injects into itself). Returns how many were ended. Behind a
-- transaction pooler this session may be on a server connection a worker used last: not itself.
select count(*) filter (where pg_terminate_backend(pid)) from unnest($1::int[]) as t(pid)
where pid <> pg_backend_pid()

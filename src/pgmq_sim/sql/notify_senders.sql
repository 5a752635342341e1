-- The sessions that sent the notifications the listener read, named (every role sees
-- application_name). $1 their backend pids.
select pid, coalesce(application_name, '') from pg_stat_activity where pid = any($1::int[])

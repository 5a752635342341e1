-- What each of the run's sessions is doing now, as its server backend says: the wait profile's
-- sample. The sampler's own session is left out; so is every session that is not the tool's.
select state, coalesce(wait_event_type, ''), coalesce(wait_event, ''), pid
from pg_stat_activity
where application_name like 'pgmq-sim%'
  and pid <> pg_backend_pid()
  and backend_type = 'client backend'
  and datname = current_database()

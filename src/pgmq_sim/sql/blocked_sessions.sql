select pid, pg_blocking_pids(pid)::text, left(coalesce(query, ''), 80)
from pg_stat_activity where wait_event_type = 'Lock'

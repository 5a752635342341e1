-- The last run's record (asked only when the table exists).
select run_id, started_at, finished_at, coalesce(outcome, ''), target, produced, ordered, audited,
       settings::text
from pgmq_sim_run

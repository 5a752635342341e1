-- procrastinate_fetch_job_v2, as procrastinate's fetch_job query calls it: the type's first job by
-- priority then id whose lock has no job running and no earlier (or higher-priority) job waiting,
-- and is due; set 'doing' and committed. One job per call (no row: nothing to do).
select j.id as msg_id, j.queue_name as queue_type, (j.args ->> 'order_id')::bigint as order_id
from procrastinate_fetch_job_v2(array[$1]::varchar[], null) j
where j.id is not null

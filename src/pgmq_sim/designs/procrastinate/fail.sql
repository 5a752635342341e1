-- A failed attempt of a running job: procrastinate_retry_job_v2 back to 'todo' at $4 (its lock waits
-- for it), or at the last attempt procrastinate_finish_job_v1 'failed' (its lock goes on without it).
select case when $4::timestamptz is null then procrastinate_finish_job_v1(j.id, 'failed', false)
            else procrastinate_retry_job_v2(j.id, $4, null, null, null) end
from procrastinate_jobs j where j.id = $1 and j.status = 'doing'

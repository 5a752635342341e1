-- A failed attempt ($1 the job, $2 which attempt, $3 the error): ready again at $4, the time the
-- tool's backoff gives, or dead when $4 is null (the last attempt). A failed head keeps its account
-- waiting until it is retried: ordered processing pays for failures with head-of-line blocking.
update jobs
set state = case when $4::timestamptz is null then 'dead' else 'ready' end,
    run_after = coalesce($4, run_after)
where job_id = $1

-- -wakeup notify: procrastinate's own trigger (procrastinate_jobs_notify_queue_job_inserted_v1, from
-- its schema) notifies channel procrastinate_queue_v1#TYPE per job, which the tool's listener reads
-- as one message of TYPE. Nothing to add: this reads that the trigger is there.
select tgname from pg_trigger where tgname = 'procrastinate_jobs_notify_queue_job_inserted_v1'

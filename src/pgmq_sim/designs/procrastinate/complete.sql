-- procrastinate_finish_job_v1: the job succeeded (kept, status 'succeeded').
select procrastinate_finish_job_v1($1, 'succeeded', false)

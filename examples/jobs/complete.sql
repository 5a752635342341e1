-- $1 the job's id: done, kept with the time it finished.
update jobs set state = 'done', finished_at = clock_timestamp() where job_id = $1

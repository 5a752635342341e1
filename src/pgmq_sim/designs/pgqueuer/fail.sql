-- A failed attempt: pgqueuer's retry_job at $4, or at the last attempt its log_job 'failed'.
select case when $4::timestamptz is null then (select count(*) from pgmq_sim_pgqueuer_log($1, 'failed', $3))
            else (select count(*) from (select pgmq_sim_pgqueuer_retry($1, $4, $3)) retried) end

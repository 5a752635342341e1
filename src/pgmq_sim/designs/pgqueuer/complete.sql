-- pgqueuer's log_job 'successful': the job deleted and logged; no row when it was finished already.
select job from pgmq_sim_pgqueuer_log($1, 'successful', null) job

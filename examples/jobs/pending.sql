-- The jobs not finished: ready (or running in a transaction not yet committed, seen as ready).
-- Done and dead jobs are finished.
select job_id from jobs where state not in ('done', 'dead')

-- The jobs not finished: ready, or running in a transaction not yet committed (seen as ready).
select job_id from jobs where state <> 'done'

-- $1 the id, $2 the kind, $3 the account, $5 not before, $6 the body ($4, a priority, is not used).
insert into jobs (job_id, kind, account, run_after, body) values ($1, $2, $3, $5, $6)

-- Up to $2 jobs of kind $1, each the first ready job of its account (a loose index scan over the
-- accounts' heads), locked with SKIP LOCKED: an account whose head another worker holds waits.
with recursive heads as (
    (select account, job_id from jobs
      where kind = $1 and state = 'ready'
      order by account, job_id limit 1)
    union all
    select n.account, n.job_id from heads h
    cross join lateral (
        select account, job_id from jobs
        where kind = $1 and state = 'ready' and account > h.account
        order by account, job_id limit 1) n
),
picked as (
    select locked.job_id from heads h
    cross join lateral (
        select job_id from jobs j
        where j.job_id = h.job_id and j.state = 'ready' and j.run_after <= clock_timestamp()
        for update skip locked) locked
    limit $2
)
update jobs j set state = 'running'
from picked
where j.job_id = picked.job_id
returning j.job_id as msg_id, j.kind as queue_type, j.account as order_id

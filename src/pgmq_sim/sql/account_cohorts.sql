-- The latency account's cohorts, found without sorting the journal: each type's completed messages
-- (their first completion's rows) counted by their time from enqueue to completion, in buckets
-- 0.1% wide on a log scale (the bucket of t seconds: floor(ln(t) / ln(1.001)), t at least 1 us),
-- from which the median's and the slowest 1%'s buckets are read (model/journeys.cohort_bounds).
select queue_type,
       floor(ln(greatest(extract(epoch from completed_at - time_added)::float8, 1e-6)) / ln(1.001))::int,
       count(distinct msg_id)
from msg_journal
where time_added is not null
group by 1, 2

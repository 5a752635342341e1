-- $1 the last cut-off (the server's epoch). Each worker's latest claim journaled since it, by a
-- completion or a failed attempt: a worker's rows commit in order, and what it has not journaled
-- began after its last completion, so every claim before the lowest of them, and every span of free
-- or claiming time before it, is in the journal (result/running_account).
select worker, extract(epoch from max(claimed_at))::float8
from (select worker, claimed_at from msg_journal where claimed_at >= to_timestamp($1)
      union all
      select worker, claimed_at from msg_failures where claimed_at >= to_timestamp($1)) x
group by worker

-- $1 the last chunk's end (the server's epoch). Each worker's latest claim journaled since it, by a
-- completion or a failed attempt: a worker's rows commit in order, so the rows it has not journaled
-- were claimed after it. Their spans of free and claim time begin after its last completion by the
-- server's clock, but are placed by durations the worker measured, which may run earlier: the chunk
-- ends a margin before the lowest of these (db/account.read_live_chunk), and sql/account_late.sql
-- finds a span that ran past the margin.
select worker, max(claimed_at)
from (select worker, claimed_at from msg_journal where claimed_at >= to_timestamp($1)
      union all
      select worker, claimed_at from msg_failures where claimed_at >= to_timestamp($1)) x
group by worker

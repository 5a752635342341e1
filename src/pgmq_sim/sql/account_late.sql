-- $1 the workers, $2 each one's latest claim journaled when the last chunk was read, $3 that chunk's
-- end (the server's epoch). The rows journaled since that read whose span of free or claim time
-- began before the chunk's end: the chunk could not hold that part, so the account is not whole.
select count(*)
from (select worker, claimed_at, greatest(coalesce(free_s, 0), coalesce(claim_s, 0)) as s
      from msg_journal where claimed_at >= to_timestamp($3)
      union all
      select worker, claimed_at, coalesce(free_s, 0) from msg_failures where claimed_at >= to_timestamp($3)) x
join unnest($1::text[], $2::timestamptz[]) as seen(worker, latest) using (worker)
where x.claimed_at > seen.latest and x.claimed_at - make_interval(secs => x.s) < to_timestamp($3)

-- Head-of-line blocking: after each failed attempt, how long the message's group waited
-- until the message was tried again (a later attempt's claim, or the completing claim).
select f.queue_type, f.order_id, count(*)::int as failures,
       coalesce(sum(extract(epoch from coalesce(
           (select min(x.claimed_at) from (
               select f2.claimed_at from msg_failures f2 where f2.msg_id = f.msg_id and f2.attempt > f.attempt
               union all
               select j.claimed_at from msg_journal j where j.msg_id = f.msg_id) x),
           f.failed_at) - f.failed_at)), 0)::float8 as blocked_s
from msg_failures f
group by f.queue_type, f.order_id
order by blocked_s desc

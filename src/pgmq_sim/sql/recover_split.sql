-- Messages in progress whose owner is gone (its backend no longer exists, seed 001) or whose
-- lease expired go back to pending; the attempt they used stays counted.
update msg_queue q
set status = 'N', owner = null, lease_until = null
where q.status = 'I'
  and (q.lease_until < clock_timestamp()
       or not exists (select 1 from pg_stat_activity a
                      where a.pid = nullif(split_part(q.owner, ':', 2), '')::int))
returning q.msg_id, q.owner, q.lease_until < clock_timestamp() as expired

-- $1: the run's sessions just seen waiting on a lock. The one place the tool asks who blocks them
-- (pg_blocking_pids, which takes the lock manager's partition locks: asked only of those waiting):
-- read by the wait sampler, for the wait profile and the lock census (result/waits, result/holders),
-- and by the stall diagnosis. A row per waiter and blocker: the waiter's pid and application, the
-- blocker's pid, application and state (whose it is, the run's or not, is decided from these, its
-- query and its database by model/identity, which knows the path's pooling), the object waited on
-- and the modes the blocker holds on it (none when it only waits ahead in the lock's queue), how long its transaction has been open, its query's start and its address, and its
-- database when that is not the run's ('' when it is). The notification queue's lock (the object lock
-- on database 0 that every notifying commit on the server takes, whatever its database) is named as
-- such. A session of another role shows no state or query to a role without pg_read_all_stats.
select w.pid, coalesce(wa.application_name, ''),
       b.pid, coalesce(b.application_name, ''), coalesce(b.state, ''),
       w.locktype,
       case when w.relation is not null then w.relation::regclass::text
            when w.locktype = 'object' and w.classid = 'pg_database'::regclass and w.objid = 0
                 and w.database = 0 then 'the notification queue'
            else w.locktype end,
       coalesce((select string_agg(distinct h.mode, ', ')
                 from pg_locks h
                 where h.pid = b.pid and h.granted and h.locktype = w.locktype
                   and h.database is not distinct from w.database
                   and h.relation is not distinct from w.relation
                   and h.page is not distinct from w.page
                   and h.tuple is not distinct from w.tuple
                   and h.transactionid is not distinct from w.transactionid
                   and h.classid is not distinct from w.classid
                   and h.objid is not distinct from w.objid
                   and h.objsubid is not distinct from w.objsubid), ''),
       coalesce(extract(epoch from now() - b.xact_start), 0)::float8,
       left(coalesce(b.query, ''), 80), coalesce(host(b.client_addr), ''),
       case when b.datname is distinct from current_database() then coalesce(b.datname, '') else '' end
from pg_locks w
join pg_stat_activity wa on wa.pid = w.pid
cross join lateral unnest(pg_blocking_pids(w.pid)) as blocker(pid)
join pg_stat_activity b on b.pid = blocker.pid
where w.pid = any($1) and not w.granted
order by b.pid, w.pid

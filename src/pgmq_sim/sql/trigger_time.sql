-- The queue tables' trigger functions and the time the server spent in them so far, where
-- track_functions counts it (pg_stat_user_functions: 'pl' or 'all'; a function never called or not
-- counted has no row there, so its calls and time are 0). $1: the queue's tables. A row per function.
select p.oid::regprocedure::text,
       coalesce(s.calls, 0)::bigint,
       coalesce(s.total_time, 0)::float8
from (select distinct t.tgfoid from pg_trigger t
      where t.tgrelid = any($1::regclass[]) and not t.tgisinternal) f
join pg_proc p on p.oid = f.tgfoid
left join pg_stat_user_functions s on s.funcid = p.oid
order by 1

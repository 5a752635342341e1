-- $1: the queue's tables. Sampled every second: dead tuples now, the session of this database
-- holding the oldest snapshot (its backend_xmin, and that xmin's age in transactions: the
-- housekeeper times a snapshot by the same xmin seen in consecutive samples, since xact_start dates
-- a transaction, not its snapshot), how many server connections are serving the run's workers now
-- (behind a pooler, at most its pool), the queue's tables and index size and their autovacuum runs
-- so far (a long run's drift).
with q as (select to_regclass(n) as t from unnest($1::text[]) n)
select coalesce((select sum(n_dead_tup) from pg_stat_user_tables where relid in (select t from q)), 0)::bigint,
       a.pid, coalesce(a.application_name, ''), a.backend_xmin::text, age(a.backend_xmin),
       (select count(*) from pg_stat_activity
         where datname = current_database() and application_name like 'pgmq-sim w%')::int,
       coalesce((select sum(pg_total_relation_size(t)) from q), 0)::bigint,
       coalesce((select sum(autovacuum_count) from pg_stat_user_tables where relid in (select t from q)), 0)::bigint
from (select 1) one
left join lateral (
    select pid, application_name, backend_xmin from pg_stat_activity
    where backend_xmin is not null and pid <> pg_backend_pid()
      and datname = current_database()  -- another database's snapshot does not hold back this one's vacuum
    order by age(backend_xmin) desc limit 1) a on true

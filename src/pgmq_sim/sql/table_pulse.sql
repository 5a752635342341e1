-- Sampled every second: dead tuples now, the session of this database holding the oldest snapshot
-- (its backend_xmin, and that xmin's age in transactions: the housekeeper times a snapshot by the
-- same xmin seen in consecutive samples, since xact_start dates a transaction, not its snapshot),
-- how many server connections are serving the run's workers now (behind a pooler, at most its
-- pool), the queue's table and index size and its autovacuum runs so far (a long run's drift).
select coalesce((select n_dead_tup from pg_stat_user_tables where relid = to_regclass('msg_queue')), 0),
       a.pid, coalesce(a.application_name, ''), a.backend_xmin::text, age(a.backend_xmin),
       (select count(*) from pg_stat_activity
         where datname = current_database() and application_name like 'pgmq-sim w%')::int,
       coalesce(pg_total_relation_size(to_regclass('msg_queue')), 0)::bigint,
       coalesce((select autovacuum_count from pg_stat_user_tables where relid = to_regclass('msg_queue')), 0)
from (select 1) one
left join lateral (
    select pid, application_name, backend_xmin from pg_stat_activity
    where backend_xmin is not null and pid <> pg_backend_pid()
      and datname = current_database()  -- another database's snapshot does not hold back this one's vacuum
    order by age(backend_xmin) desc limit 1) a on true

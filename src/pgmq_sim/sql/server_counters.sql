-- The server's cumulative counters for this database, read before and after the worker phase
-- (their differences are the run's server cost). The WAL position is exact at once; the
-- statistics views count what backends have flushed (at transaction end, at most once a second,
-- and when they exit).
select pg_current_wal_insert_lsn()::text,
       to_regclass('pg_catalog.pg_stat_wal') is not null,
       to_regclass('pg_catalog.pg_stat_io') is not null,
       exists (select 1 from pg_extension where extname = 'pg_stat_statements'),
       d.xact_commit, d.xact_rollback, d.blks_read, d.blks_hit,
       d.tup_inserted, d.tup_updated, d.tup_deleted, d.tup_returned, d.tup_fetched
from pg_stat_database d
where d.datname = current_database()

-- The run's database, and the sessions of others in it whose last statement ran PgQ's ticker (a
-- pgqd already serving it).
select current_database(),
       (select count(*) from pg_stat_activity
        where datname = current_database() and pid <> pg_backend_pid() and query ilike '%pgq.ticker%')

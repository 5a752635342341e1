-- Whether pg_stat_statements is installed in this database (its view is then read on its own: the
-- server refuses it when the library is not preloaded).
select exists (select 1 from pg_extension where extname = 'pg_stat_statements')

-- One row of pg_stat_statements, to learn whether this role may read it.
select 1 from pg_stat_statements limit 1

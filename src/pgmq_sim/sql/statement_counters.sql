-- Per statement of this database and role, from pg_stat_statements (when it is installed), with
-- comments and runs of white space taken out of the text shown; not this reading itself.
select s.queryid,
       left(btrim(regexp_replace(regexp_replace(s.query, '--[^\n]*', '', 'g'), '\s+', ' ', 'g')), 200),
       s.calls, s.total_exec_time, s.rows, s.shared_blks_hit, s.shared_blks_read, s.wal_bytes::bigint
from pg_stat_statements s
where s.dbid = (select oid from pg_database where datname = current_database())
  and s.userid = (select oid from pg_roles where rolname = current_user)
  and s.queryid is not null
  and regexp_replace(s.query, '--[^\n]*', '', 'g') not like '%pg_stat_statements%' -- this reading

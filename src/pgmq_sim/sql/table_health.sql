-- $1: the queue's tables. Dead tuples and maintenance runs from the statistics views; sizes summed
-- over the tables (the live rows are counted exactly, table by table, by the caller).
with q as (select to_regclass(n) as t from unnest($1::text[]) n)
select coalesce(sum(s.n_dead_tup), 0), coalesce(sum(s.autovacuum_count), 0),
       coalesce(sum(s.autoanalyze_count), 0), coalesce(sum(pg_table_size(q.t)), 0),
       coalesce(sum(pg_indexes_size(q.t)), 0),
       coalesce(sum(pg_total_relation_size(nullif(c.reltoastrelid, 0))), 0)
from q join pg_class c on c.oid = q.t left join pg_stat_user_tables s on s.relid = q.t

-- Live rows counted exactly; dead tuples and maintenance runs from the statistics views.
select (select count(*) from msg_queue), coalesce(s.n_dead_tup, 0), coalesce(s.autovacuum_count, 0),
       coalesce(s.autoanalyze_count, 0), pg_table_size('msg_queue'), pg_indexes_size('msg_queue'),
       coalesce(pg_total_relation_size(nullif(c.reltoastrelid, 0)), 0)
from pg_class c left join pg_stat_user_tables s on s.relid = c.oid
where c.oid = 'msg_queue'::regclass

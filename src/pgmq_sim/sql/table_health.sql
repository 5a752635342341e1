select coalesce(s.n_live_tup, 0), coalesce(s.n_dead_tup, 0), coalesce(s.autovacuum_count, 0),
       coalesce(s.autoanalyze_count, 0), pg_table_size('msg_queue'), pg_indexes_size('msg_queue')
from pg_class c left join pg_stat_user_tables s on s.relid = c.oid
where c.oid = 'msg_queue'::regclass

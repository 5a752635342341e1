-- Block I/O of every backend type and context, summed (PostgreSQL 16 and later).
select coalesce(sum(reads), 0)::bigint, coalesce(sum(writes), 0)::bigint,
       coalesce(sum(extends), 0)::bigint, coalesce(sum(hits), 0)::bigint,
       coalesce(sum(fsyncs), 0)::bigint
from pg_stat_io

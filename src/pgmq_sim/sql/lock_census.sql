-- $1: the queue's tables, $2: the sessions seen holding rows of them. The locks a claim may skip
-- (SKIP LOCKED, a try-lock) or wait on, by the session holding them, sampled while the run goes:
-- every session of this database holding an advisory lock, or a lock on a queue table that blocks a
-- claim's writes (ShareLock or stronger), and every session that blocks one of the run's sessions
-- waiting on a lock (pg_blocking_pids, asked only of those waiting: a producer held by a lock on a
-- parent row shows here), with its application, whether it is one of the run's workers, its state,
-- how long its transaction has been open, and the run's sessions it blocks. The rows each holds
-- are counted apart (lock_census_rows.sql). The server's clock comes first, to place the sample on
-- the run's timeline.
with q as (select to_regclass(n) as t from unnest($1::text[]) n),
held as (
    select l.pid,
           count(*) filter (where l.locktype = 'advisory') as advisory,
           string_agg(distinct l.mode || ' on ' || l.relation::regclass::text, ', ')
               filter (where l.locktype = 'relation') as relation
    from pg_locks l
    where l.granted and l.pid <> pg_backend_pid()
      and (l.locktype = 'advisory'
           or (l.locktype = 'relation' and l.relation in (select t from q)
               and l.mode in ('ShareLock', 'ShareRowExclusiveLock', 'ExclusiveLock', 'AccessExclusiveLock')))
      and l.database = (select oid from pg_database where datname = current_database())
    group by l.pid
),
blocking as (
    select b.pid, string_agg(distinct w.application_name, ', ') as blocks
    from pg_stat_activity w
    cross join lateral unnest(pg_blocking_pids(w.pid)) as b(pid)
    where w.application_name like 'pgmq-sim%' and w.wait_event_type = 'Lock'
      and w.datname = current_database() and w.pid <> pg_backend_pid()
    group by b.pid
),
pids as (select pid from held union select pid from blocking union select unnest($2::int[]))
select extract(epoch from clock_timestamp())::float8, p.pid, coalesce(a.application_name, ''),
       coalesce(a.application_name, '') like 'pgmq-sim w%', coalesce(a.state, ''),
       coalesce(extract(epoch from clock_timestamp() - a.xact_start), 0)::float8,
       coalesce(h.advisory, 0), coalesce(h.relation, ''), coalesce(k.blocks, '')
from (select 1) one
left join pids p on true
left join held h on h.pid = p.pid
left join blocking k on k.pid = p.pid
left join pg_stat_activity a on a.pid = p.pid

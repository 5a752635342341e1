-- $1: the queue's tables, $2: the sessions seen holding rows of them. The locks a claim may skip
-- (SKIP LOCKED, a try-lock) or wait on, by the session holding them, sampled while the run goes:
-- every session of this database holding an advisory lock, or a lock on a queue table that blocks a
-- claim's writes (ShareLock or stronger), with its application and its query's start (whose it is
-- is decided from them by model/identity), its state and how long its transaction has been open. The rows each holds are counted
-- apart (lock_census_rows.sql); who blocks the run's waiting sessions comes from the wait sampler's
-- lock_blockers.sql (a producer held by a lock on a parent row shows there). The server's clock comes first, to place the sample on
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
pids as (select pid from held union select unnest($2::int[]))
select extract(epoch from clock_timestamp())::float8, p.pid, coalesce(a.application_name, ''),
       left(coalesce(a.query, ''), 80), coalesce(a.state, ''),
       coalesce(extract(epoch from clock_timestamp() - a.xact_start), 0)::float8,
       coalesce(h.advisory, 0), coalesce(h.relation, '')
from (select 1) one
left join pids p on true
left join held h on h.pid = p.pid
left join pg_stat_activity a on a.pid = p.pid

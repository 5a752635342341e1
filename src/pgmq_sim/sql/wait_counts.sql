-- The wait profile's sample, classified where the rows are: a row for the run's producer sessions and
-- one for the rest, when there are any. The run's sessions counted by the class result/waits.classify
-- gives each (an idle session is in none; a test holds the two alike): on CPU, Lock, WAL flush, IO,
-- LWLock, the client (idle in transaction), other. Then the Lock waits by event ('relation:3,tuple:1'),
-- the pids waiting on a lock ('4242,4243'), whose blockers the sampler reads a few times a second, and
-- the other waits by type and event ('Timeout:PgSleep:2'). The sessions: the tool's client backends in
-- this database, the sampler's own, the live audit's (the tool's bookkeeping, not the queue's) and a
-- pressure's (it stands for a session outside the run) left out. One statement, one read of
-- pg_stat_activity.
with s as materialized (
    select state, wait_event_type as type, wait_event as event, pid,
           application_name = 'pgmq-sim producer' as producer
    from pg_stat_activity
    where application_name like 'pgmq-sim%'
      and application_name not in ('pgmq-sim pressure', 'pgmq-sim live audit')
      and pid <> pg_backend_pid()
      and backend_type = 'client backend'
      and datname = current_database()
)
select count(*) filter (where state = 'active' and type is null),
       count(*) filter (where state = 'active' and type = 'Lock'),
       count(*) filter (where state = 'active' and (type, event) in
                        (('LWLock', 'WALWrite'), ('IO', 'WALSync'), ('IO', 'WALWrite'), ('IO', 'WALInitSync'))),
       count(*) filter (where state = 'active' and type = 'IO'
                        and event not in ('WALSync', 'WALWrite', 'WALInitSync')),
       count(*) filter (where state = 'active' and type = 'LWLock' and event <> 'WALWrite'),
       count(*) filter (where (state = 'active' and type = 'Client') or state like 'idle in transaction%'),
       count(*) filter (where state = 'active' and type not in ('Lock', 'IO', 'LWLock', 'Client')),
       (select string_agg(event || ':' || n, ',')
        from (select event, count(*) as n from s x
              where x.producer = g.producer and state = 'active' and type = 'Lock' group by event) e),
       (select string_agg(pid::text, ',') from s x where x.producer = g.producer and type = 'Lock'),
       (select string_agg(type || ':' || event || ':' || n, ',')
        from (select type, event, count(*) as n from s x
              where x.producer = g.producer and state = 'active'
                and type not in ('Lock', 'IO', 'LWLock', 'Client')
              group by type, event) o),
       g.producer
from s g
group by g.producer

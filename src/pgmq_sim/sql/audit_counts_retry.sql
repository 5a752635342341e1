-- With leases and retries. $1: highest msg_id produced, $2: the ids judged already (0: none).
-- A message is processed (journaled) or dead-lettered or still unfinished ('N', 'I'); otherwise it is missing. A message both
-- journaled and dead-lettered counts as a duplicate completion.
select
    (select count(distinct msg_id) from msg_journal) as processed,
    (select count(*) - count(distinct msg_id) from msg_journal)
      + (select count(*) from msg_queue q where q.status = 'D'
          and exists (select 1 from msg_journal j where j.msg_id = q.msg_id)) as duplicates,
    (select count(*) from generate_series($2::bigint + 1, $1) g(id)
        where not exists (select 1 from msg_journal j where j.msg_id = g.id)
          and not exists (select 1 from msg_queue q
                          where q.msg_id = g.id and q.status in ('N', 'I', 'D'))) as missing,
    (select count(*) from msg_queue q where q.status in ('N', 'I')) as left_behind,
    (select count(*) from msg_queue q where q.status = 'D') as dead_lettered,
    (select count(*) from msg_journal where attempt > 1)
      + (select count(*) from msg_queue where status = 'D' and attempts > 1) as redelivered,
    (select coalesce(sum(attempt), 0) from msg_journal)
      + (select coalesce(sum(attempts), 0) from msg_queue where status = 'D') as attempts,
    (select count(*) from msg_failures) as failed_attempts

-- $1: highest msg_id produced (ids 1..$1 were inserted), $2: the ids judged already (0: none; the
-- live audit's closed windows hold 1..$2).
-- missing: produced, never journaled and no longer pending (lost, whether the row was
-- deleted or marked processed); left_behind: still pending in the queue.
select
    (select count(distinct msg_id) from msg_journal) as processed,
    (select count(*) - count(distinct msg_id) from msg_journal) as duplicates,
    (select count(*) from generate_series($2::bigint + 1, $1) g(id)
        where not exists (select 1 from msg_journal j where j.msg_id = g.id)
          and not exists (select 1 from msg_queue q where q.msg_id = g.id and q.status = 'N')) as missing,
    (select count(*) from msg_queue q where q.status = 'N') as left_behind

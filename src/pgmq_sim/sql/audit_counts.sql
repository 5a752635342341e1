-- $1: highest msg_id produced (ids 1..$1 were inserted).
-- The claim of msg_id, never pending again, is what a duplicate or a loss is measured against.
select
    (select count(distinct msg_id) from msg_journal) as processed,
    (select count(*) - count(distinct msg_id) from msg_journal) as duplicates,
    (select count(*) from generate_series(1, $1) g(id)
        where not exists (select 1 from msg_journal j where j.msg_id = g.id)) as missing,
    (select count(*) from msg_queue q
        where q.status <> 'P'
           or not exists (select 1 from msg_journal j where j.msg_id = q.msg_id)) as left_behind

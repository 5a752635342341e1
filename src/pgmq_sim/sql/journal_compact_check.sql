-- $1 run_id, $2 the window closed last's hi. The closed windows' journal rows as they counted them,
-- less those compacted since, and the journal's rows of their messages now (not carried any more,
-- as sql/journal_rows_through.sql counts them): more now, a message completed again after its
-- window closed, which compaction must leave for the end to find.
select (select coalesce(sum(journal_rows - compacted_rows), 0) from pgmq_sim_windows where run_id = $1),
       (select count(*) from msg_journal j
        where j.msg_id <= $2 and not exists (select 1 from pgmq_sim_carried c where c.msg_id = j.msg_id))

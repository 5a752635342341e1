-- $1 run_id, $2 the window closed last, $3 and $4 the msg_ids to compact (after $3, up to $4: closed
-- windows' messages), $5 the latency account's cut-off (the server's epoch: it has read every claim
-- before it), $6 seconds a completion is kept (a worker in doubt of its commit asks the journal
-- within its reconnect timeout). The journal rows of those messages claimed before the cut-off and
-- completed before that, not carried, deleted (their windows judged them, the account read them,
-- the groups' marks keep what order needs), and
-- counted on the window closed last; the lowest msg_id left in the range (the statement's snapshot
-- still holds the rows it deletes), less one: where the next compaction starts.
with gone as (
    delete from msg_journal j
    where j.msg_id > $3 and j.msg_id <= $4 and j.claimed_at < to_timestamp($5)
      and j.completed_at < statement_timestamp() - make_interval(secs => $6)
      and not exists (select 1 from pgmq_sim_carried c where c.msg_id = j.msg_id)
    returning 1
),
counted as (
    update pgmq_sim_windows set compacted_rows = compacted_rows + (select count(*) from gone)
    where run_id = $1 and window_no = $2
)
select (select count(*) from gone),
       coalesce((select min(j.msg_id) - 1 from msg_journal j
                 where j.msg_id > $3 and j.msg_id <= $4
                   and (j.claimed_at >= to_timestamp($5)
                        or j.completed_at >= statement_timestamp() - make_interval(secs => $6)
                        or exists (select 1 from pgmq_sim_carried c where c.msg_id = j.msg_id))), $4)

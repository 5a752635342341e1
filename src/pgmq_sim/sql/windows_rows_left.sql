-- $1 run_id. The closed windows' journal rows as they counted them, less those compacted since:
-- what sql/journal_rows_through.sql counts now, unless a message completed again after its window
-- closed (compaction must leave that row for the end to find).
select coalesce(sum(journal_rows - compacted_rows), 0) from pgmq_sim_windows where run_id = $1

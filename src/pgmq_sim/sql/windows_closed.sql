-- The live audit's closed windows of run $1, in order: number, lo, hi, journal rows, carried,
-- passed, audit, journal rows compacted.
select window_no, lo, hi, journal_rows, carried, passed, audit, compacted_rows from pgmq_sim_windows where run_id = $1
order by window_no

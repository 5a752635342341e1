-- The live audit's closed windows of run $1, in order: number, lo, hi, journal rows, carried,
-- passed, audit.
select window_no, lo, hi, journal_rows, carried, passed, audit from pgmq_sim_windows where run_id = $1
order by window_no

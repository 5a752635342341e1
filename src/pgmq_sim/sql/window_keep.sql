-- $1 run_id, $2 window_no, $3 lo, $4 hi, $5 the window's journal rows, $6 its messages carried,
-- $7 passed, $8 its audit
insert into pgmq_sim_windows (run_id, window_no, lo, hi, journal_rows, carried, passed, audit)
values ($1, $2, $3, $4, $5, $6, $7, $8)

-- The window's messages not finished yet (pending, in progress, waiting for a retry): carried to
-- the next window in place of the last ones (window_views_seed.sql).
select msg_id from msg_queue where time_processed is null and status <> 'D'

-- The lowest msg_id of the window (window_views_seed.sql) not finished yet: pending, in progress or
-- waiting for a retry (null: none).
select min(msg_id) from msg_queue where time_processed is null and status <> 'D'

-- From here on in this transaction the live audit's window (window_views.sql) holds, before its
-- journal rows, each group's last completed message of the closed windows.
select set_config('pgmq_sim.window_marks', 'on', true)

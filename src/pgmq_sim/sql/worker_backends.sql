-- The backends of the workers (their application_name is 'pgmq-sim wN').
select pid from pg_stat_activity where application_name like 'pgmq-sim w%' order by pid

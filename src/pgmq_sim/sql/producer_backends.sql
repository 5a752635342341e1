-- The producer's backend (its application_name is 'pgmq-sim producer').
select pid from pg_stat_activity where application_name = 'pgmq-sim producer' order by pid

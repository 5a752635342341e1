-- A repeatable-read transaction's first query takes its snapshot: held until it commits.
select count(*) from msg_queue where false

-- A repeatable-read transaction's first query takes its snapshot: held until it commits.
select 1

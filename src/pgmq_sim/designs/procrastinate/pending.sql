-- Unfinished: jobs to do or running.
select id from procrastinate_jobs where status in ('todo', 'doing')

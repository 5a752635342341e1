-- Unfinished: jobs queued or picked.
select id from pgqueuer where status in ('queued', 'picked')

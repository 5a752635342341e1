-- Unfinished: new (ready or not yet due) or running.
select id from task where state in ('new', 'running')

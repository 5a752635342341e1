-- Hung tasks (running past their lease: the worker died or is stuck) back to new, run by the
-- housekeeper; returned, each one recovered.
update task set state = 'new', owner = null, lease_until = null
where state = 'running' and lease_until < clock_timestamp()
returning id

-- $1 id, $2 the worker: done and gone (-delmsg), if the worker still holds its lease.
delete from task where id = $1 and owner = $2 and state = 'running'

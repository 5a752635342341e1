-- $1 id, $2 the worker: done, if the worker still holds its lease (else another has it now).
update task set state = 'done', owner = null, lease_until = null
where id = $1 and owner = $2 and state = 'running'

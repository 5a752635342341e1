-- $1 id, $3 the error, $4 when to try again (null: dead); the group waits for its head meanwhile.
update task
set state = case when $4::timestamptz is null then 'dead' else 'new' end,
    not_before = coalesce($4, not_before), owner = null, lease_until = null, error_text = $3
where id = $1 and state = 'running'

-- $1 id: a success, kept (its status and its last attempt can be searched).
update queue_message set status = 'SUCCESS', next_attempt_time = null where id = $1

-- $1 id, $3 the error, $4 the next attempt's time (null: the last attempt failed, a dead letter).
update queue_message
set status = 'ERROR', next_attempt_time = $4, last_attempt_error_message = $3
where id = $1

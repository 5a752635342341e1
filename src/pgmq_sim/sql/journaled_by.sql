-- $1 msg_id, $2 worker: did this worker's completion of the message commit?
select exists (select 1 from msg_journal where msg_id = $1 and worker = $2)

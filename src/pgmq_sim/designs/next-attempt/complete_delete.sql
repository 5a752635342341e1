-- $1 id: done and gone (-delmsg).
delete from queue_message where id = $1

select msg_id from msg_journal group by msg_id having count(*) > 1 order by msg_id limit $1

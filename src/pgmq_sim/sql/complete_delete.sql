delete from msg_queue where msg_id = $1 returning time_added, clock_timestamp()

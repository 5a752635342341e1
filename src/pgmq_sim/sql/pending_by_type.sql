select queue_type, count(*) from msg_queue where status = 'N' group by queue_type order by queue_type

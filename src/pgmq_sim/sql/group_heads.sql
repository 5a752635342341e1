-- The first pending message of every (queue_type, order_id) group, whether
-- another pending message of the group shares its time_added, and the xid in
-- its xmax (the locking transaction, if any).
select h.queue_type, h.order_id, h.msg_id,
       (select count(*) from msg_queue d
         where d.queue_type = h.queue_type and d.order_id = h.order_id
           and d.status = 'N' and d.time_added = h.time_added) > 1 as time_tied,
       h.xmax::text
from (
    select distinct on (queue_type, order_id) queue_type, order_id, msg_id, time_added, xmax
    from msg_queue where status = 'N'
    order by queue_type, order_id, msg_id
) h
order by h.queue_type, h.order_id

-- $1: msg_ids of group heads; returns those no other transaction has locked
select msg_id from msg_queue where msg_id = any($1) for update skip locked

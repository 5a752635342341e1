-- After a lost commit answer: did the message with this msg_id land (pending or marked processed)?
select exists (select 1 from msg_queue where msg_id = $1)

-- After a lost commit answer: did the message with this msg_id land? It may be pending, marked
-- processed, or already processed and deleted (then its journal row has it).
select exists (select 1 from msg_queue where msg_id = $1)
    or exists (select 1 from msg_journal where msg_id = $1)

-- After the run: of these msg_ids ($1, an array), those that landed: pending, marked processed, or
-- already processed and deleted (then its journal row has it).
select msg_id from msg_queue where msg_id = any($1)
union
select msg_id from msg_journal where msg_id = any($1)

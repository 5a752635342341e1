-- After the run: of these msg_ids ($1, an array), those that landed (pending or marked processed).
select msg_id from msg_queue where msg_id = any($1)

-- The journal's rows of msg_ids 1..$1: the closed windows' rows and any completion after they closed.
select count(*) from msg_journal where msg_id <= $1

-- $1: the window's messages still pending, carried to the next window in place of the last ones
-- (window_carried_clear.sql emptied the table first).
insert into pgmq_sim_carried select unnest($1::bigint[])

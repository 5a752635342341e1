-- pgq.insert_event into the type's queue: the payload as ev_data, the group $3 in ev_extra1, the
-- tool's number $1 in ev_extra2. PgQ assigns the event id; returned with its type (TYPE:ev_id),
-- which is this design's id everywhere. PgQ has no due time: $5 is not used.
select $2 || ':' || pgq.insert_event('pgmq_sim_' || $2, 'msg', coalesce(encode($6, 'base64'), ''), $3::text, $1::text, null, null) as msg_id

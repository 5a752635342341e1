-- pgmq.send: $2 the queue (one per type), the message (the tool's number $1 and the payload $6),
-- the group $3 in the x-pgmq-group header, visible from $5 (a delay). pgmq assigns the id; returned
-- with its queue (queue:msg_id), which is this design's id everywhere.
select $2 || ':' || pgmq.send(
    $2,
    jsonb_build_object('n', $1, 'payload', encode($6, 'base64')),
    jsonb_build_object('x-pgmq-group', $3::text),
    $5
) as msg_id

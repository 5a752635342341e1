-- Seed 002's queue table: a message is unfinished while it has a next attempt time (pending, delayed
-- or waiting for a retry); a success or a dead letter has none.
drop table if exists queue_message;
create table queue_message (
    id bigint primary key,
    queue_type text not null,
    order_id bigint not null,
    status text not null default 'NOT_ATTEMPTED' check (status in ('NOT_ATTEMPTED', 'SUCCESS', 'ERROR')),
    next_attempt_time timestamptz,
    try_count integer not null default 0,
    last_attempt_time timestamptz,
    last_attempt_error_message text,
    payload bytea
);
-- the unfinished messages of each group in id order: every group's head is one index probe away
create index queue_message_unfinished on queue_message (queue_type, order_id, id)
    where next_attempt_time is not null;

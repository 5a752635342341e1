-- The pgmq extension's queue table (q_) and its archive (a_), for one queue of typed, keyed messages.
drop table if exists q_messages;
create table q_messages (
    msg_id bigint primary key,
    queue_type text not null,
    order_id bigint not null,
    read_ct integer not null default 0,
    enqueued_at timestamptz not null default clock_timestamp(),
    vt timestamptz not null,  -- visible from: a read moves it past the visibility timeout
    message bytea
);
-- every group's messages in id order: its head (the first message still there) is one probe away
create index q_messages_groups on q_messages (queue_type, order_id, msg_id);
drop table if exists a_messages;
create table a_messages (
    msg_id bigint primary key,
    queue_type text not null,
    order_id bigint not null,
    read_ct integer not null,
    enqueued_at timestamptz not null,
    archived_at timestamptz not null default clock_timestamp(),
    vt timestamptz not null,
    message bytea
);

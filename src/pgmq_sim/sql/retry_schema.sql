-- Columns for leases, retries and dead letters (-tx split, -fail-rate), added to the queue
-- the schema file made. Statuses: N new, I in progress (split), P processed, D dead letter.
alter table msg_queue
    add column attempts integer not null default 0,
    add column owner text,
    add column lease_until timestamp with time zone,
    add column next_attempt_at timestamp with time zone,
    add column last_error text;
-- Every failed attempt, written in the transaction that records it.
drop table if exists msg_failures;
create table msg_failures(
    msg_id integer not null,
    queue_type varchar(10) not null,
    order_id integer not null,
    attempt integer not null,
    worker text not null,
    claimed_at timestamp with time zone not null,
    failed_at timestamp with time zone not null,
    next_attempt_at timestamp with time zone,
    dead boolean not null,
    error text not null
);
comment on table msg_failures is 'pgmq-sim: created by pgmq-sim; replaced by its next run';
-- Who owns messages in progress (split mode): a worker's token and its last heartbeat. A token
-- whose heartbeat stopped (the worker or its process died) gives its messages back within about a
-- second, whatever connection or pooler it used.
drop table if exists pgmq_sim_owners;
create table pgmq_sim_owners(
    owner text primary key,
    beat_at timestamp with time zone not null
);
comment on table pgmq_sim_owners is 'pgmq-sim: created by pgmq-sim; replaced by its next run';

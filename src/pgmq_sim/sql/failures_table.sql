-- The tool's own record of failed attempts and of split mode's owners (-tx split, -fail-rate),
-- whatever the design: every failed attempt, written in the transaction that records it.
drop table if exists msg_failures;
create table msg_failures(
    msg_id bigint not null,
    queue_type text not null,
    order_id bigint not null,
    attempt integer not null,
    worker text not null,
    claimed_at timestamp with time zone not null,
    failed_at timestamp with time zone not null,
    next_attempt_at timestamp with time zone,
    dead boolean not null,
    error text not null,
    free_s double precision -- how long the worker was free before this claim (msg_journal.free_s)
);
create index msg_failures_msg_id on msg_failures (msg_id);
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

-- Audit journal: one row per completed message, written in the transaction
-- that completes it, so it survives -delmsg, crashes and several processes.
-- time_added is the message's own (server clock), so end-to-end latency needs no client clock;
-- attempt is the attempt that completed it (1 unless it was retried or redelivered).
drop table if exists msg_journal;
create table msg_journal(
    msg_id bigint not null,
    queue_type text not null,
    order_id bigint not null,
    worker text not null,
    claimed_at timestamp with time zone not null,
    completed_at timestamp with time zone not null,
    time_added timestamp with time zone,
    due_at timestamp with time zone, -- a delayed message's due time (the tool's enqueue log)
    attempt integer not null default 1,
    -- how long the worker had been free before this claim (its claims came back empty, it slept
    -- after one, or it was reconnecting); null: it came straight from its last message. The latency
    -- account's evidence of a free worker.
    free_s double precision,
    -- how long the claim statement that took it ran, on the server's clock, from its arrival to its
    -- locks: the latency account's claim part. Null: not measured.
    claim_s double precision
);

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
-- The live audit reads a window of msg_ids at a time: rows land in roughly that order, so a block
-- range index finds a window's rows without reading the journal (its upkeep costs next to nothing).
create index msg_journal_msg_id on msg_journal using brin (msg_id) with (pages_per_range = 8);
-- The latency account reads the journal a chunk of claim time at a time as the run goes: rows land in
-- about claim order, so a block range index finds the recent ones likewise.
create index msg_journal_claimed_at on msg_journal using brin (claimed_at) with (pages_per_range = 8);
-- The live audit's closed windows: msg_ids lo+1..hi and the earlier windows' messages that were
-- still pending when they closed and have finished since, judged in one snapshot; journal_rows,
-- the window's journal rows then (a later count that differs: a message completed again after its
-- window closed); carried, its messages still pending, judged by a later window; compacted_rows, the
-- closed windows' journal rows deleted once judged and accounted, counted on the window closed last
-- when they were (sql/journal_compact.sql).
drop table if exists pgmq_sim_windows;
create table pgmq_sim_windows(
    run_id text not null,
    window_no integer not null,
    lo bigint not null,
    hi bigint not null,
    closed_at timestamp with time zone not null default clock_timestamp(),
    journal_rows bigint not null,
    carried bigint not null,
    passed boolean not null,
    audit jsonb not null,
    compacted_rows bigint not null default 0,
    primary key (run_id, window_no)
);
-- The closed windows' messages still pending when the last one closed: the next window judges them
-- once they finish.
drop table if exists pgmq_sim_carried;
create table pgmq_sim_carried (msg_id bigint primary key);
-- Each group's last completed message in the closed windows: what its next message, in a window
-- not closed yet, is checked against (per-group order across windows).
drop table if exists pgmq_sim_marks;
create table pgmq_sim_marks (like msg_journal);
create unique index pgmq_sim_marks_group on pgmq_sim_marks (queue_type, order_id);

-- The tool's log of what it enqueued into a design of its own folder, written by the producer in
-- the enqueue's own transaction (a statement of its own, so the server's per-statement statistics
-- give it to the tool): it says which messages landed (the design's table is unknown to the tool),
-- when each was enqueued and when it was due, so one audit and one latency hold for every design.
drop table if exists pgmq_sim_enqueued;
create table pgmq_sim_enqueued(
    msg_id bigint primary key,
    queue_type text not null,
    order_id bigint not null,
    priority integer not null default 0,
    time_added timestamp with time zone not null,
    due_at timestamp with time zone not null
);
comment on table pgmq_sim_enqueued is 'pgmq-sim: created by pgmq-sim; replaced by its next run';

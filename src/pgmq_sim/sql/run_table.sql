-- The run's own record: what it promised and how far it got. `produced` is raised in the
-- transaction that writes each batch of messages, so it counts committed messages only and
-- a producer that lost its connection mid-commit learns what really landed.
drop table if exists pgmq_sim_run;
create table pgmq_sim_run(
    run_id text not null,
    started_at timestamp with time zone not null default clock_timestamp(),
    finished_at timestamp with time zone,
    outcome text,
    target bigint, -- null: a run bounded by time alone
    produced bigint not null default 0,
    ordered boolean not null,
    audited boolean not null,
    settings jsonb not null
);
comment on table pgmq_sim_run is 'pgmq-sim: created by pgmq-sim; replaced by its next run';

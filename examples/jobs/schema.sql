-- A team's own queue: jobs of a kind for an account, run in order per (kind, account), with a text
-- state, a not-before time and a bigint id that is the tool's msg_id ($1 of enqueue.sql).
drop table if exists jobs;
create table jobs (
    job_id bigint primary key,
    kind text not null,
    account bigint not null,
    state text not null default 'ready',  -- ready, then done
    run_after timestamptz not null,
    body bytea,
    finished_at timestamptz
);
-- the ready jobs of each (kind, account) in id order: every account's head is one index probe away
create index jobs_ready on jobs (kind, account, job_id) where state = 'ready';

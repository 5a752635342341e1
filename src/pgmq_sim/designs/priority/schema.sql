-- Seed 004's task table: a priority, a not-before time, a state, the lease of a running task.
drop table if exists task;
create table task (
    id bigint primary key,
    queue_type text not null,
    order_id bigint not null,
    priority integer not null default 0,
    not_before timestamptz not null,
    state text not null default 'new' check (state in ('new', 'running', 'done', 'dead')),
    owner text,
    lease_until timestamptz,
    attempt integer not null default 0,
    error_text text,
    payload bytea
);
-- ready tasks in the order they are served: the priority and the not-before time under one index
create index task_ready on task (queue_type, priority desc, not_before, id) where state = 'new';
-- unfinished tasks by group: whether a task is its group's head is one index probe
create index task_unfinished on task (queue_type, order_id, id) where state in ('new', 'running');

-- A bystander's own table (-bystander RATE): a small workload beside the queue, on the same server,
-- whose latency shows what the queue costs its neighbours.
drop table if exists pgmq_sim_bystander;
create table pgmq_sim_bystander(id integer primary key, counter bigint not null default 0, note text);
insert into pgmq_sim_bystander (id, note) select g, md5(g::text) from generate_series(1, 1000) g;
comment on table pgmq_sim_bystander is 'pgmq-sim: created by pgmq-sim; replaced by its next run';

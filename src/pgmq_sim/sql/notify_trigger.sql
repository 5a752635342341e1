-- Wake-up for -wakeup notify: every insert signals, per type it added, how many
-- messages arrived ('type1:3'), so the listener wakes that many idle workers.
create or replace function msg_queue_notify() returns trigger language plpgsql as $$
begin
    perform pg_notify('pgmq_sim', queue_type || ':' || n)
    from (select queue_type, count(*) as n from inserted group by queue_type) t;
    return null;
end $$;
comment on function msg_queue_notify() is 'pgmq-sim: created by pgmq-sim; replaced by its next run';
create trigger msg_queue_notify after insert on msg_queue
    referencing new table as inserted for each statement execute function msg_queue_notify();

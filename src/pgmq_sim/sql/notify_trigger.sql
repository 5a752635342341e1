-- Wake-up for -wakeup notify: every insert signals the types it added.
create or replace function msg_queue_notify() returns trigger language plpgsql as $$
begin
    perform pg_notify('pgmq_sim', queue_type) from (select distinct queue_type from inserted) t;
    return null;
end $$;
create trigger msg_queue_notify after insert on msg_queue
    referencing new table as inserted for each statement execute function msg_queue_notify();

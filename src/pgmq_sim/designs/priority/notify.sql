-- For -wakeup notify: each insert tells the tool, per type, how many tasks arrived.
create or replace function task_notify() returns trigger language plpgsql as $$
begin
    perform pg_notify('pgmq_sim', queue_type || ':' || n)
    from (select queue_type, count(*) as n from inserted group by queue_type) t;
    return null;
end $$;
create trigger task_notify after insert on task
    referencing new table as inserted for each statement execute function task_notify();

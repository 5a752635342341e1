-- For -wakeup notify: each insert tells the tool, per type, how many messages arrived.
create or replace function q_messages_notify() returns trigger language plpgsql as $$
begin
    perform pg_notify('pgmq_sim', queue_type || ':' || n)
    from (select queue_type, count(*) as n from inserted group by queue_type) t;
    return null;
end $$;
create trigger q_messages_notify after insert on q_messages
    referencing new table as inserted for each statement execute function q_messages_notify();

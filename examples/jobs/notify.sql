-- For -wakeup notify: each insert tells the tool, per kind, how many jobs arrived ('type1:3').
create or replace function jobs_notify() returns trigger language plpgsql as $$
begin
    perform pg_notify('pgmq_sim', kind || ':' || n)
    from (select kind, count(*) as n from inserted group by kind) t;
    return null;
end $$;
create trigger jobs_notify after insert on jobs
    referencing new table as inserted for each statement execute function jobs_notify();

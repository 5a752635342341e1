-- procrastinate as its package ships it (queue.toml: requires = "procrastinate"): a previous run's
-- objects dropped (its tables, types and functions), then the package's schema.sql, run as it is.
drop table if exists procrastinate_events, procrastinate_periodic_defers, procrastinate_jobs,
    procrastinate_workers cascade;
drop type if exists procrastinate_job_status, procrastinate_job_event_type, procrastinate_job_to_defer_v1 cascade;
do $drop$
declare f regprocedure;
begin
    for f in select p.oid::regprocedure from pg_proc p
             where p.proname like 'procrastinate\_%' and p.pronamespace = current_schema()::regnamespace
    loop
        execute 'drop function ' || f;
    end loop;
end $drop$;
do $install$ begin execute {{procrastinate.schema}}; end $install$;

-- Before the seed table's schema runs: a msg_queue this tool created (a run's) is dropped, so a
-- schema file without its own `drop table` (the Go tool's) runs again; a table of others is kept
-- (the check refused it, unless -replace-tables, and the schema's own drop decides then).
do $$
begin
    if coalesce(obj_description(to_regclass('msg_queue'), 'pg_class') like 'pgmq-sim: %', false) then
        drop table msg_queue;
    end if;
end $$

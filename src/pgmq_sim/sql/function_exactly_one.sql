-- The CHECK of function_wrapper.sql for a completion that must finish exactly one row: a split
-- design's completion after its lease passed finishes none, and must roll back with its journal row.
if changed <> 1 then
        raise exception 'pgmq-sim: the completion finished % rows, not one', changed using errcode = 'P0002';
    end if;

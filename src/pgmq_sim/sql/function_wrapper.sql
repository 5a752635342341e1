-- A design's statement as a function that answers with the rows it changed (its own file need not
-- say what it returns). Filled in by db/statements: NAME, ARGUMENTS, USING (each argument passed on),
-- CHECK (for a completion that must finish exactly one row: nothing, or a raise) and BODY.
create or replace function NAME ARGUMENTS returns bigint language plpgsql volatile as $pgmq_sim$
declare changed bigint;
begin
    execute $pgmq_sim_statement$BODY$pgmq_sim_statement$ using USING;
    get diagnostics changed = row_count;
    CHECK
    return changed;
end
$pgmq_sim$

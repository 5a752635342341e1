-- On a server of the tool's own (the embedded one preloads the module): per-statement cost.
create extension if not exists pg_stat_statements

-- In this transaction the tool's tables, not the live audit's views of them that this session may hold
-- (temporary views, which are found first unless pg_temp is named last in the search path).
select set_config('search_path', current_setting('search_path') || ', pg_temp', true)

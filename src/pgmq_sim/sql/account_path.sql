-- The tool's tables, not the live audit's views of a window of them: temporary, so searched first
-- unless named in the path; named last, for this transaction.
select set_config('search_path', current_setting('search_path') || ', pg_temp', true)

-- The window's journal rows (window_views.sql, without the marks).
select count(*) from msg_journal

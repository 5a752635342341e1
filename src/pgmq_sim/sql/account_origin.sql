-- The latency account's zero: the run's first enqueue among the journaled messages, as the
-- server's epoch (sql/account_journeys.sql and account_free.sql count seconds from it).
select extract(epoch from min(time_added))::float8 from msg_journal

-- WAL records, full-page images and bytes, server-wide (PostgreSQL 14 and later).
select wal_records, wal_fpi, wal_bytes::bigint from pg_stat_wal

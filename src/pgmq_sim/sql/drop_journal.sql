drop table if exists msg_journal

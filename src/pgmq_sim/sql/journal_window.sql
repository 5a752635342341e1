-- A phase's latency account: its messages (enqueued from {lo} to {hi}, the server's epoch) stand in
-- for the journal in this session, so the account's own statements read them alone. The view binds
-- the real journal when it is made; it is dropped with the session.
create temporary view msg_journal as
select * from msg_journal
where time_added >= to_timestamp({lo}) and time_added < to_timestamp({hi})

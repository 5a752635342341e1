-- An idle-in-transaction pressure: the transaction takes an XID (as one that wrote does) and its
-- repeatable-read snapshot, then stays open; vacuum can remove nothing newer until it ends.
select txid_current(), pg_backend_pid()

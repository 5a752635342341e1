-- The rows of one queue table ({table}) that each open transaction has locked or changed: a row's
-- xmax is the transaction that did, and each transaction holds an ExclusiveLock on its own id. A
-- sequential scan: the housekeeper counts only while the table is small.
select l.pid, count(*)
from {table} x
join pg_locks l on l.locktype = 'transactionid' and l.transactionid = x.xmax and l.granted
                and l.mode = 'ExclusiveLock'
where l.pid <> pg_backend_pid()
group by l.pid

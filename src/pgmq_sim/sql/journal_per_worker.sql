-- $1 worker names: how many completions each committed (a lost worker process's totals).
select worker, count(*) from msg_journal where worker = any($1) group by worker

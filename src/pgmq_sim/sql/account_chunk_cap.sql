-- $1 the last chunk's end (the server's epoch), $2 a count: the claim time of the journal's row that
-- many rows on from it, in claim order (null: fewer are journaled), so that one read of the
-- account holds at most that many journeys however far behind the run it fell.
select extract(epoch from claimed_at)::float8
from msg_journal
where claimed_at >= to_timestamp($1)
order by claimed_at
offset $2
limit 1

-- $1 owner tokens of the workers alive in one process: registered (a session's first) or beaten
-- (the process's heartbeat), now.
insert into pgmq_sim_owners (owner, beat_at)
select token, clock_timestamp() from unnest($1::text[]) as t(token)
on conflict (owner) do update set beat_at = excluded.beat_at

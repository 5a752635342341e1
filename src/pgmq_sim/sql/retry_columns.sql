-- Columns for leases, retries and dead letters (-tx split, -fail-rate), added to the queue
-- the schema file made. Statuses: N new, I in progress (split), P processed, D dead letter.
alter table msg_queue
    add column attempts integer not null default 0,
    add column owner text,
    add column lease_until timestamp with time zone,
    add column next_attempt_at timestamp with time zone,
    add column last_error text;

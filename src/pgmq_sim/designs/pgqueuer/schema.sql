-- pgqueuer as its query builder writes it (queue.toml: requires = "pgqueuer"): a previous run's
-- objects dropped by its uninstall query, then its install query. Its statements take arrays and
-- pgqueuer's own parameters; each runs as written inside a function that passes it the tool's
-- arguments (execute ... using), so the design's files call pgqueuer's SQL with the tool's.
drop function if exists pgmq_sim_pgqueuer_dequeue(text, integer, text, float8);  -- returns its rows
do $uninstall$
begin
    if to_regclass('pgqueuer') is not null then
        execute {{pgqueuer.uninstall}};
    end if;
end $uninstall$;
do $install$ begin execute {{pgqueuer.install}}; end $install$;

-- The enqueue (a batch of one): priority, entrypoint (the type), payload, execute_after (the due time
-- from now: execute_after is then the due time), no dedupe key, headers (the tool's number and the group).
create or replace function pgmq_sim_pgqueuer_enqueue(n bigint, qtype text, grp bigint, prio integer,
                                                     due timestamptz, body bytea)
returns bigint language plpgsql as $f$
declare
    position bigint;
    job bigint;
begin
    execute {{pgqueuer.enqueue}} into position, job
    using array[prio], array[qtype], array[body], array[due - now()],
          array[null::text], array[jsonb_build_object('n', n, 'order_id', grp)];
    return job;
end $f$;

-- The dequeue as pgqueuer's worker runs it: up to qty jobs of the entrypoint, its queue manager the
-- worker (its owner token as a uuid), the heartbeat timeout the lease.
create or replace function pgmq_sim_pgqueuer_dequeue(qtype text, qty integer, owner text, lease float8)
returns setof pgqueuer language plpgsql as $f$
begin
    return query execute {{pgqueuer.dequeue}}
    using qty, array[qtype], md5(coalesce(owner, ''))::uuid, make_interval(secs => lease);
end $f$;

-- log_job: the job done ('successful': deleted, logged) or failed for good ('failed': kept); no row
-- when it is no longer picked (taken again after its heartbeat timed out, and finished there).
create or replace function pgmq_sim_pgqueuer_log(job bigint, outcome text, error text)
returns setof bigint language plpgsql as $f$
begin
    if not exists (select 1 from pgqueuer q where q.id = job and q.status = 'picked') then
        return;
    end if;
    execute {{pgqueuer.log_job}}
    using array[job], array[outcome]::pgqueuer_status[],
          array[case when error is null then null else jsonb_build_object('error', error) end];
    return next job;
end $f$;

-- retry_job: back to 'queued' after the backoff, its attempts counted.
create or replace function pgmq_sim_pgqueuer_retry(job bigint, retry_at timestamptz, error text)
returns void language plpgsql as $f$
begin
    execute {{pgqueuer.retry_job}}
    using job, greatest(retry_at - now(), interval '0'), jsonb_build_object('error', error);
end $f$;

-- pgqueuer's heartbeat: the jobs picked by workers still alive (their owner beaten by the tool's
-- heartbeat within the last 2 s) beat, so only a dead worker's jobs go stale and are picked again.
create or replace function pgmq_sim_pgqueuer_beat() returns setof bigint language plpgsql as $f$
begin
    if to_regclass('pgmq_sim_owners') is null then
        return;
    end if;
    execute {{pgqueuer.heartbeat}}
    using array(select q.id from pgqueuer q join pgmq_sim_owners o on q.queue_manager_id = md5(o.owner)::uuid
                where q.status = 'picked' and o.beat_at > clock_timestamp() - interval '2 seconds');
end $f$;

-- The real PgQ: the extension made ready by the tool before this file (queue.toml: requires = "pgq"),
-- and pgqd ticking the queues for the run. One PgQ queue per message type (pgmq_sim_TYPE, the run's
-- types: current_setting('pgmq_sim.types')) with one consumer, pgmq_sim, whose batches the type's
-- workers share. The ticker's queue settings set the batch latency: a tick (a batch's end) once
-- 100 ms passed with events waiting, or 500 events.
select pgq.drop_queue(q.queue_name, true) from pgq.queue q
where q.queue_name in (select 'pgmq_sim_' || t from unnest(string_to_array(current_setting('pgmq_sim.types'), ',')) t);
select pgq.create_queue(q), pgq.register_consumer(q, 'pgmq_sim'),
       pgq.set_queue_config(q, 'ticker_max_lag', '100 milliseconds'),
       pgq.set_queue_config(q, 'ticker_max_count', '500')
from (select 'pgmq_sim_' || t as q from unnest(string_to_array(current_setting('pgmq_sim.types'), ',')) t) queues;

-- Each type's consumer: the batch its workers share now (null: none taken).
drop table if exists pgmq_sim_pgq_consumers;
create table pgmq_sim_pgq_consumers (queue_type text primary key, batch_id bigint);
insert into pgmq_sim_pgq_consumers (queue_type)
select t from unnest(string_to_array(current_setting('pgmq_sim.types'), ',')) t;
-- The events of the batches taken: which worker has each (a lease) and which are done. A batch is
-- finished (pgq.finish_batch) once every event of it is done.
drop table if exists pgmq_sim_pgq_events;
create table pgmq_sim_pgq_events (
    queue_type text not null,
    ev_id bigint not null,
    order_id bigint not null,
    batch_id bigint not null,
    owner_token text,
    lease_until timestamptz,
    deliveries integer not null default 0,
    done boolean not null default false,
    primary key (queue_type, ev_id)
);
create index pgmq_sim_pgq_events_open on pgmq_sim_pgq_events (queue_type, batch_id, order_id, ev_id) where not done;

-- The claim: the type's current batch (the next one once every event of it is done: finish_batch,
-- next_batch, get_batch_events), then up to qty events that are their group's first not done in
-- it and not leased to another worker, leased to this one for `lease` seconds. The consumer's row
-- lock makes the type's claims take turns; the claim commits.
create or replace function pgmq_sim_pgq_claim(qtype text, qty integer, owner text, lease float8)
returns table (msg_id text, queue_type text, order_id bigint) language plpgsql as $$
#variable_conflict use_column
declare
    b bigint;
begin
    select c.batch_id into b from pgmq_sim_pgq_consumers c where c.queue_type = qtype for update;
    loop
        if b is not null and not exists (select 1 from pgmq_sim_pgq_events e
                                         where e.queue_type = qtype and e.batch_id = b and not e.done) then
            perform pgq.finish_batch(b);
            b := null;
        end if;
        exit when b is not null;
        b := pgq.next_batch('pgmq_sim_' || qtype, 'pgmq_sim');
        update pgmq_sim_pgq_consumers c set batch_id = b where c.queue_type = qtype;
        exit when b is null;  -- no tick since the last batch: nothing new yet
        insert into pgmq_sim_pgq_events (queue_type, ev_id, order_id, batch_id)
        select qtype, ev.ev_id, ev.ev_extra1::bigint, b from pgq.get_batch_events(b) ev
        on conflict do nothing;  -- a batch delivered again: what was done stays done
    end loop;
    if b is null then
        return;
    end if;
    return query
    with heads as (
        select e.ev_id from pgmq_sim_pgq_events e
        where e.queue_type = qtype and e.batch_id = b and not e.done
          and (e.lease_until is null or e.lease_until <= clock_timestamp())
          and not exists (select 1 from pgmq_sim_pgq_events p
                          where p.queue_type = qtype and p.batch_id = b and p.order_id = e.order_id
                            and not p.done and p.ev_id < e.ev_id)
        order by e.ev_id
        limit qty
    )
    update pgmq_sim_pgq_events e
    set owner_token = owner, lease_until = clock_timestamp() + make_interval(secs => lease),
        deliveries = e.deliveries + 1
    from heads h
    where e.queue_type = qtype and e.ev_id = h.ev_id and not e.done
    returning qtype || ':' || e.ev_id, qtype, e.order_id;
end $$;

-- The events not done: in a batch taken and not done, or not yet in a batch (still in the queue's
-- event tables), as this design names them (TYPE:ev_id).
create or replace function pgmq_sim_pgq_pending() returns setof text language plpgsql stable as $$
declare
    q record;
begin
    for q in select c.queue_type, pq.queue_data_pfx as events from pgmq_sim_pgq_consumers c
             join pgq.queue pq on pq.queue_name = 'pgmq_sim_' || c.queue_type
    loop
        return query execute format(
            'select %L || '':'' || ev.ev_id from %s ev where not exists (select 1 from pgmq_sim_pgq_events d'
            ' where d.queue_type = %L and d.ev_id = ev.ev_id and d.done)',
            q.queue_type, q.events, q.queue_type);
    end loop;
end $$;

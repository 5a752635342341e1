-- The real pgmq: its SQL made ready by the tool before this file (queue.toml: requires = "pgmq").
-- One pgmq queue per message type (the run's types: current_setting('pgmq_sim.types')), each with
-- pgmq's FIFO index on its headers (create_fifo_index, as pgmq advises for its grouped reads).
select pgmq.drop_queue(m.queue_name) from pgmq.meta m
where m.queue_name = any (string_to_array(current_setting('pgmq_sim.types'), ','));
select pgmq.create(t), pgmq.create_fifo_index(t)
from unnest(string_to_array(current_setting('pgmq_sim.types'), ',')) t;
-- The run's queues, and the ids of the messages still in them as this design names them
-- (queue:msg_id: pgmq's msg_id is per queue, so a message's id here carries its queue).
drop table if exists pgmq_sim_pgmq_queues;
create table pgmq_sim_pgmq_queues as
select t as queue_name from unnest(string_to_array(current_setting('pgmq_sim.types'), ',')) t;
create or replace function pgmq_sim_pgmq_pending() returns setof text language plpgsql stable as $$
declare q text;
begin
    for q in select queue_name from pgmq_sim_pgmq_queues
    loop
        return query execute format('select %L || '':'' || msg_id from pgmq.%I', q, 'q_' || q);
    end loop;
end $$;

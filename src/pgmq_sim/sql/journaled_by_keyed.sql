-- $1 the design's own id (text), $2 worker: did this worker's completion of the message commit?
select exists (select 1 from msg_journal j join pgmq_sim_enqueued e on e.msg_id = j.msg_id
               where e.design_id = $1 and j.worker = $2)

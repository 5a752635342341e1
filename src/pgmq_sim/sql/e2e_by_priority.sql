-- End-to-end latency per priority level, in ms, from the tool's own log and journal: each message's
-- first completion, from its arrival (or its due time, when it was delayed).
select e.priority,
       percentile_cont(array[0.5, 0.95, 0.99]) within group (
           order by extract(epoch from j.completed_at - greatest(e.time_added, e.due_at)) * 1000)
from (select distinct on (msg_id) msg_id, completed_at from msg_journal order by msg_id, completed_at) j
join pgmq_sim_enqueued e on e.msg_id = j.msg_id
group by e.priority
order by e.priority

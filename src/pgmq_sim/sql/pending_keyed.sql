-- A design of its own ids: its pending messages (pending_design, its pending.sql's rows) as the
-- tool's numbers, for the audit.
create temp table pending_messages (msg_id) on commit drop as
select e.msg_id from pending_design p join pgmq_sim_enqueued e on e.design_id = p.id::text

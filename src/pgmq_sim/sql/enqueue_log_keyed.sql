-- A design of its own ids: the id its enqueue returned, beside the tool's number, looked up by the
-- journal's row of each completion (one index probe).
alter table pgmq_sim_enqueued add column design_id text;
create unique index pgmq_sim_enqueued_design_id on pgmq_sim_enqueued (design_id);

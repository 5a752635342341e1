comment on table msg_journal is 'pgmq-sim: created by pgmq-sim; replaced by its next run';
comment on table pgmq_sim_windows is 'pgmq-sim: created by pgmq-sim; replaced by its next run';
comment on table pgmq_sim_marks is 'pgmq-sim: created by pgmq-sim; replaced by its next run';
comment on table pgmq_sim_carried is 'pgmq-sim: created by pgmq-sim; replaced by its next run';

comment on table msg_journal is 'pgmq-sim: created by pgmq-sim; replaced by its next run';

-- pgmq.archive (-archive): the message moved to its queue's archive table (pgmq.a_TYPE).
select archived from pgmq.archive(split_part($1, ':', 1), split_part($1, ':', 2)::bigint) archived where archived

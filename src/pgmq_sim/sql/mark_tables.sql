-- Tables this tool created carry this comment; a later run replaces only marked tables.
comment on table msg_queue is 'pgmq-sim: created by pgmq-sim; replaced by its next run';

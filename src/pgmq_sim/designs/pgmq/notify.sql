-- -wakeup notify: pgmq's own insert notification (enable_notify_insert, in pgmq since 1.7), not
-- throttled: it notifies channel pgmq.q_TYPE.INSERT, which the tool's listener reads as one message
-- of TYPE. A server's older pgmq extension has none: its workers wake by the -poll-interval fallback.
select pgmq.enable_notify_insert(t, 0)
from unnest(string_to_array(current_setting('pgmq_sim.types'), ',')) t
where to_regprocedure('pgmq.enable_notify_insert(text, integer)') is not null

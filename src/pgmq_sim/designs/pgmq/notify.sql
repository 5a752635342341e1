-- -wakeup notify: pgmq's own insert notification (enable_notify_insert, pgmq 1.7 on), not throttled:
-- it notifies channel pgmq.q_TYPE.INSERT, which the tool's listener reads as one message of TYPE.
select pgmq.enable_notify_insert(t, 0) from unnest(string_to_array(current_setting('pgmq_sim.types'), ',')) t

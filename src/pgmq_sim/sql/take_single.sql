-- pgmq-sim: function (bigint) returns table (attempt_no int)
-- $1 msg_id. The attempt is counted in the claim's transaction (rolled back with it if the
-- session dies, kept by a failure that rolls back to the savepoint after it).
update msg_queue set attempts = attempts + 1 where msg_id = $1 returning attempts

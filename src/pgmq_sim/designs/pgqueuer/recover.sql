-- Run by the tool's housekeeper every quarter lease: pgqueuer's heartbeat for the jobs of the
-- workers alive (schema.sql's pgmq_sim_pgqueuer_beat). It gives nothing back itself: a dead
-- worker's job goes stale after -lease (pgqueuer's heartbeat timeout) and its dequeue takes it again.
select id from pgmq_sim_pgqueuer_beat() id

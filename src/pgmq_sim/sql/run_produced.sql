-- The producer's count, recorded now and then (and in the batch's transaction when no row can
-- vouch for a message: -delmsg without a journal).
update pgmq_sim_run set produced = $1 where produced < $1

-- After a lost commit answer: did the enqueue of this msg_id land? The tool's log row commits with it.
select exists (select 1 from pgmq_sim_enqueued where msg_id = $1)

-- The ticker's settings of the run's PgQ queues (pgmq_sim_TYPE): when a tick ends a batch.
select queue_name, queue_ticker_max_count, extract(epoch from queue_ticker_max_lag),
       extract(epoch from queue_ticker_idle_period)
from pgq.get_queue_info() where queue_name like 'pgmq\_sim\_%' order by queue_name

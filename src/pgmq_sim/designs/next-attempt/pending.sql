-- Unfinished: pending, delayed or waiting for a retry.
select id from queue_message where next_attempt_time is not null

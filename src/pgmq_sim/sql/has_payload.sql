-- Whether the queue the schema file made has a payload column (-payload-bytes needs one).
select exists (select 1 from pg_attribute
               where attrelid = 'msg_queue'::regclass and attname = 'payload' and not attisdropped)

-- PgQ: its version in this database (if created), the version the server has available, whether
-- this role may create it (a superuser), whether it has PgQ's admin role (pgq_admin: its queue
-- functions and the ticker's; the event tables stay the extension owner's, reached through PgQ's
-- SECURITY DEFINER functions), the role and database, and the owner of the tool's consumer table
-- (the role whose run made the queues now in this database; null: none).
select (select extversion from pg_extension where extname = 'pgq'),
       (select default_version from pg_available_extensions where name = 'pgq'),
       (select rolsuper from pg_roles where rolname = current_user),
       exists (select 1 from pg_roles where rolname = 'pgq_admin')
           and pg_has_role(current_user, 'pgq_admin', 'MEMBER'),
       current_user, current_database(),
       (select pg_get_userbyid(c.relowner) from pg_class c where c.oid = to_regclass('pgmq_sim_pgq_consumers'))

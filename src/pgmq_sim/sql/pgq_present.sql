-- PgQ: its version in this database (if created), the version the server has available, and whether
-- this role may create it (a superuser).
select (select extversion from pg_extension where extname = 'pgq'),
       (select default_version from pg_available_extensions where name = 'pgq'),
       (select rolsuper from pg_roles where rolname = current_user)

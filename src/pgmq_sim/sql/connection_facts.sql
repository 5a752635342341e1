-- What the probe asks of its connection: the client port the server sees (a proxy or pooler in
-- between shows its own), whether this role is a superuser, whether it may see every session's
-- query and state, the server's version, and the TLS version of this backend's connection.
select inet_client_port(),
       r.rolsuper,
       r.rolsuper or pg_has_role(current_user, 'pg_read_all_stats', 'member'),
       current_setting('server_version_num')::int,
       (select version from pg_stat_ssl where pid = pg_backend_pid() and ssl)
from pg_roles r where r.rolname = current_user

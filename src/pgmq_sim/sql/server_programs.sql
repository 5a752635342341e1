-- Whether this role may run programs on the server (COPY TO PROGRAM): superuser or granted.
select (select rolsuper from pg_roles where rolname = current_user)
       or pg_has_role(current_user, 'pg_execute_server_program', 'member')

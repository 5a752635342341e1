-- Superuser only: SIGKILL one backend through the server's own shell, so the postmaster
-- resets every session as after a crash (a restart, as clients see it). {pid} is an integer
-- the tool fills in (COPY TO PROGRAM takes no parameters).
copy (select 1) to program 'kill -9 {pid}'

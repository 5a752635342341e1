"""pgmq-sim: load simulator for PostgreSQL tables used as ordered message queues."""

__version__ = "0.1.0"

"""A throwaway PostgreSQL owned by one process: its processes (`processes`) and its life (`postgres`)."""

"""The one layer that speaks SQL: connection policy, the tool's own operations on the queue and the
server's views, a worker's claim session. Everything else calls their named operations."""

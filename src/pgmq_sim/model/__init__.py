"""The run's vocabulary and shapes: kinds, events, traffic, keys, the sweep, backoff."""

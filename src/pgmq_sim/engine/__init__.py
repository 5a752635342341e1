"""A run: its state, its named phases, and the parts a kind of run is composed of (who carries the
workers, how messages arrive, when the run has reached its end)."""

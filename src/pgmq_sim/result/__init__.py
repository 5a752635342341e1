"""What a run measures and what its result is: counters, histograms, costs, waits, the path."""

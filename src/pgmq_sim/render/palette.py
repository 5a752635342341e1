"""One table of what the charts draw with: the colours, the percentiles and their line styles, the
faults' and the latency account's colours. The report's charts and -plot read them from here."""

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
PERCENTILES = (("e2e_p50_ms", "p50", "-"), ("e2e_p95_ms", "p95", "--"), ("e2e_p99_ms", "p99", ":"))
FAULT_COLORS = {
    "kill-connection": "#d62728",
    "kill-worker": "#9467bd",
    "restart-server": "#000000",
    "hold-xmin": "#8c564b",
    "lock-table": "#bcbd22",
    "outage": "#7f7f7f",
}
EPISODE_COLOR = "#e377c2"  # an episode's span: a stretch worse than the run's own baseline
SPLIT_COLORS = {
    "due": "#c7c7c7",
    "ordering": "#9467bd",
    "claim": "#1f77b4",
    "capacity": "#ff7f0e",
    "hidden": "#d62728",
    "service": "#2ca02c",
}

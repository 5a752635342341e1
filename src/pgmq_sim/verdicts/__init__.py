"""What is read from a finished result: the audit, the limit, the advice, the checks, drift, diff,
outages and the stall's causes."""

"""pgmq-sim's workers on Locust's distributed runners: one master (audit, report; the producer,
unless a -rate or -rate-profile spreads it over the workers: `producing`) and worker processes on this host
(--processes N) or others (--worker --master-host H).

Only `options` may be imported by a single-process run, and only `child` (with what it imports) by
a worker process's child, which runs the queue workers on an event loop: the other modules need
Locust, which monkey-patches the process with gevent (see pgmq_sim.launch).
"""

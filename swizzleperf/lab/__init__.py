"""Research tooling: the simulator's fidelity against counters and the executors' audit.

Used by benchmarks/ and tests, never by the command line.
"""

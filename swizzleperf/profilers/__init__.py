"""Profiler backends behind one protocol (see base.py): the simulator, ncu and rocprofv3."""

#!/usr/bin/env python3
"""The host's speed, probed: a fixed pure-Python work unit timed on the calling thread.

The lent machines' virtual CPUs run in two speeds, stretches of seconds each, about 1.8x apart
(probe_host_state.py; README.md "The host's two speeds"). cpu_probe() times a short unit just
before a measured forward or engine iteration; is_fast() says whether it ran at the fast speed:
below FAST_RATIO x the fastest probe this process has seen. Used by measure_batches.py (every
repeat), measure_engine.py --host-probe (every iteration), probe_host_state.py and
host_probe_residuals.py. Standard library only.
"""
import statistics
import time

# The two host speeds are about 1.8x apart; sqrt(1.8) = 1.34 splits them evenly on a log scale.
FAST_RATIO = 1.34
PROBE_CALIBRATION_S = 3.0
PROBE = {"enabled": True, "reference_s": float("inf")}


def cpu_work(iterations):
    """Seconds a fixed pure-Python loop of this many iterations takes now."""
    t0 = time.perf_counter()
    acc = 0
    for i in range(iterations):
        acc += i * i % 7
    return time.perf_counter() - t0


def cpu_probe():
    """Seconds one fixed pure-Python work unit takes now (about 0.3 ms fast, 0.55 ms slow)."""
    if not PROBE["enabled"]:
        return 0.0
    dt = cpu_work(5000)
    PROBE["reference_s"] = min(PROBE["reference_s"], dt)
    return dt


def is_fast(probe_s):
    return not PROBE["enabled"] or probe_s < FAST_RATIO * PROBE["reference_s"]


def calibrate_probe():
    end = time.perf_counter() + PROBE_CALIBRATION_S
    while time.perf_counter() < end:
        cpu_probe()


def split_modes(times, probes):
    fast = [t for t, p in zip(times, probes) if is_fast(p)]
    slow = [t for t, p in zip(times, probes) if not is_fast(p)]
    return {"probe_s": probes, "fast_n": len(fast), "slow_n": len(slow),
            "fast_median_s": statistics.median(fast) if fast else None,
            "slow_median_s": statistics.median(slow) if slow else None}

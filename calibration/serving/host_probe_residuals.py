#!/usr/bin/env python3
"""The engine's host launch against the host's speed, iteration by iteration.

Reads an iteration log written by `measure_engine.py --host-probe` (probe_s: measure_batches.py's
CPU work unit timed on the engine's thread just before the iteration) and the process's host fit
(fit_engine_host.py on the same log), and prints per run: the probe's p10/p50/p90, the
correlation of the probe with the launch residual (measured - fitted), and the median residual
of the iterations whose probe was fast (below host_speed.FAST_RATIO x the run's fastest
probe) and slow.

  host_probe_residuals.py ITERATIONS_JSON[.gz] HOST_JSON
Standard library only.
"""
import gzip
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fit_engine_host import TERMS, features, predict  # noqa: E402
from host_speed import FAST_RATIO  # noqa: E402


def load(path):
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        return json.load(f)


def main():
    doc, host = load(sys.argv[1]), load(sys.argv[2])
    for r in doc["runs"]:
        c = r["columns"]
        if "probe_s" not in c or len(c["probe_s"]) < 5:
            continue
        fit = host["models"][r["model"]]["launch"]
        coef = [fit[t] for t in TERMS]
        pred = [predict(coef, features(c, i)) for i in range(len(c["probe_s"]))]
        pr = c["probe_s"]
        res = [c["launch_s"][i] - pred[i] for i in range(len(pr))]
        n = len(pr)
        mp, mr = statistics.fmean(pr), statistics.fmean(res)
        corr = sum((a - mp) * (b - mr) for a, b in zip(pr, res)) / n / (statistics.pstdev(pr) * statistics.pstdev(res))
        cut = FAST_RATIO * min(pr)
        fast = [x for p, x in zip(pr, res) if p < cut]
        slow = [x for p, x in zip(pr, res) if p >= cut]
        q = sorted(pr)
        med = lambda v: "%+.1f" % (statistics.median(v) * 1e3) if v else "-"  # noqa: E731
        print("%s %-12s n=%4d probe p10/p50/p90 %.3f/%.3f/%.3f ms  corr(probe, launch residual) %+.2f  "
              "median residual: fast %s ms (%d), slow %s ms (%d)" % (
                  r["model"], r["label"], n, q[n // 10] * 1e3, q[n // 2] * 1e3, q[9 * n // 10] * 1e3, corr,
                  med(fast), len(fast), med(slow), len(slow)))


if __name__ == "__main__":
    main()

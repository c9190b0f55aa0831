#!/usr/bin/env python3
"""How long the host's fast and slow stretches last, and on how many CPUs at once.

README.md "The host's two speeds": the lent machines' virtual CPUs run a fixed pure-Python work
unit at two speeds about 1.8x apart, in stretches of seconds. A model of the engine's host as a
two-state process needs the share of time in each state and the lengths of the stretches. This
script runs one process per listed CPU (each pinned to its CPU), each timing host_speed.cpu_work
(5,000 iterations, 0.25-0.6 ms) back to back for SECONDS, and keeps per BIN_S bin the median unit
time. Then, per CPU: a bin is slow when its median is at least host_speed.FAST_RATIO x the CPU's
fastest bin; the slow share; the lengths of the runs of slow and of fast bins (median, p90, max);
and, between CPUs, how often two are in the same state beyond what their shares give by chance.

  run:      python3 calibration/serving/probe_host_stretches.py run OUT.json SECONDS [CPU ...]
  analyse:  python3 calibration/serving/probe_host_stretches.py analyse OUT.json[.gz]
Standard library only.
"""
import gzip
import json
import multiprocessing
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from host_speed import FAST_RATIO, cpu_work  # noqa: E402

BIN_S = 0.05


def worker(cpu, seconds, t_start, conn):
    os.sched_setaffinity(0, {cpu})
    time.sleep(max(0.0, t_start - time.time()))
    bins, cur, cur_bin = [], [], 0
    while True:
        now = time.time() - t_start
        if now >= seconds:
            break
        b = int(now / BIN_S)
        if b != cur_bin and cur:
            bins.append([cur_bin, statistics.median(cur), len(cur)])
            cur = []
        cur_bin = b
        cur.append(cpu_work(5000))
    if cur:
        bins.append([cur_bin, statistics.median(cur), len(cur)])
    conn.send(bins)
    conn.close()


def run(path, seconds, cpus):
    t_start = time.time() + 0.5
    procs = []
    for cpu in cpus:
        parent, child = multiprocessing.Pipe()
        p = multiprocessing.Process(target=worker, args=(cpu, seconds, t_start, child))
        p.start()
        procs.append((cpu, p, parent))
    doc = {"format": "clustersim-host-stretches/1", "source": "calibration/serving/probe_host_stretches.py",
           "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "seconds": seconds, "bin_s": BIN_S,
           "cpu_count": os.cpu_count(),
           "model_name": next((l.split(":")[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")),
                              None),
           "unit": "host_speed.cpu_work(5000), seconds; per bin [index, median, count]", "cpus": {}}
    for cpu, p, parent in procs:
        doc["cpus"][str(cpu)] = parent.recv()
        p.join()
    with open(path, "w") as f:
        json.dump(doc, f)
    analyse(path)


def runs_of(states):
    out = {True: [], False: []}
    if not states:
        return out
    cur, n = states[0], 1
    for s in states[1:]:
        if s == cur:
            n += 1
        else:
            out[cur].append(n)
            cur, n = s, 1
    out[cur].append(n)
    return out


def q(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(p * len(v)))] if v else 0


def analyse(path):
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        doc = json.load(f)
    bin_s = doc["bin_s"]
    states = {}
    for cpu, bins in doc["cpus"].items():
        fastest = min(b[1] for b in bins)
        st = {b[0]: b[1] >= FAST_RATIO * fastest for b in bins}
        states[cpu] = st
        r = runs_of([st[k] for k in sorted(st)])
        share = sum(st.values()) / len(st)
        fast_med = statistics.median([b[1] for b in bins if not st[b[0]]] or [0])
        slow_med = statistics.median([b[1] for b in bins if st[b[0]]] or [0])
        print("cpu %3s: %5d bins, slow share %.2f, unit fast %.3f ms slow %.3f ms (x%.2f); slow stretches median "
              "%.2f s p90 %.2f s max %.2f s (%d); fast stretches median %.2f s p90 %.2f s max %.2f s (%d)" % (
                  cpu, len(bins), share, fast_med * 1e3, slow_med * 1e3, slow_med / fast_med if fast_med else 0,
                  statistics.median(r[True] or [0]) * bin_s, q(r[True], 0.9) * bin_s, max(r[True] or [0]) * bin_s,
                  len(r[True]), statistics.median(r[False] or [0]) * bin_s, q(r[False], 0.9) * bin_s,
                  max(r[False] or [0]) * bin_s, len(r[False])))
    cpus = sorted(states)
    for i, a in enumerate(cpus):
        for b in cpus[i + 1:]:
            common = sorted(set(states[a]) & set(states[b]))
            if not common:
                continue
            pa = sum(states[a][k] for k in common) / len(common)
            pb = sum(states[b][k] for k in common) / len(common)
            same = sum(states[a][k] == states[b][k] for k in common) / len(common)
            print("cpus %s and %s: same state %.2f of the time (by chance %.2f)" % (
                a, b, same, pa * pb + (1 - pa) * (1 - pb)))


if __name__ == "__main__":
    if sys.argv[1] == "run":
        cpus_arg = [int(c) for c in sys.argv[4:]]
        if not cpus_arg:
            allowed = sorted(os.sched_getaffinity(0))
            cpus_arg = sorted({allowed[0], allowed[len(allowed) // 3], allowed[2 * len(allowed) // 3], allowed[-1]})
        run(sys.argv[2], float(sys.argv[3]), cpus_arg)
    else:
        analyse(sys.argv[2])

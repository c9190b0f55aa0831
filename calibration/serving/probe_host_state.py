#!/usr/bin/env python3
"""Is the eager engine's slow host mode the machine or the software?

An eager forward of the 1B (measure_batches.py's cells, profile_batches.py) launches in
12.3 ms in some stretches and 18-21 ms in others, with nothing changed; the 8B in 24 and
37-44 ms. This script times, side by side in time:
  cpu    a fixed pure-Python work unit (no GPU), back to back for SECONDS, the time of each;
  fwd    one eager forward of the 1B decode at B=1, C=128 (host-bound), back to back, the
         host time of each call and the CUDA-event time;
while a second process runs the cpu unit on another CPU (side_cpu); each first with the
process free to run on any CPU, then pinned to one CPU
(os.sched_setaffinity), and samples /proc/stat (steal, iowait) and each CPU's clock
(/proc/cpuinfo "cpu MHz") every 0.5 s. If the CPU work unit slows in the same stretches and
by the same ratio as the forward, the slow mode is the machine's (frequency or hypervisor
steal), not PyTorch's or the engine's.

  python3 calibration/serving/probe_host_state.py OUT.json [SECONDS]
"""
import json
import multiprocessing
import os
import sys
import threading
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from host_speed import cpu_work  # noqa: E402
from measure_batches import build_cache, build_model, ids, logits_kwargs, timed_host  # noqa: E402


def proc_stat():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    names = ["user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"]
    return dict(zip(names, v))


def cpu_mhz():
    try:
        return [float(l.split(":")[1]) for l in open("/proc/cpuinfo") if l.startswith("cpu MHz")]
    except OSError:
        return []


class Sampler(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True)
        self.rows, self.stop = [], False

    def run(self):
        while not self.stop:
            self.rows.append({"t": time.perf_counter(), "stat": proc_stat(), "mhz": cpu_mhz()})
            time.sleep(0.5)


def run_cpu(seconds):
    out, end = [], time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        out.append([t0, cpu_work(20000)])
    return out


def run_fwd(call, seconds):
    out, end = [], time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        t_event, t_host, o = timed_host(call)
        del o
        out.append([t0, t_host, t_event])
    return out


def side_cpu(cpu, seconds, conn):
    """The CPU work unit in another process on another CPU, while the forward runs."""
    os.sched_setaffinity(0, {cpu})
    conn.send(run_cpu(seconds))
    conn.close()


def main():
    path = sys.argv[1]
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 8.0
    doc = {"format": "clustersim-host-state-probe/1", "source": "calibration/serving/probe_host_state.py",
           "cpu_count": os.cpu_count(), "affinity_at_start": sorted(os.sched_getaffinity(0)),
           "governor": open("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor").read().strip()
           if os.path.exists("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor") else None,
           "model_name": next((l.split(":")[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), None),
           "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "phases": []}
    model, info = build_model("llama-1b")
    lk, _ = logits_kwargs(model)
    sampler = Sampler()
    sampler.start()
    with torch.inference_mode():
        cache, _ = build_cache(model, 1, 128, info["vocab_size"], 16384, lk)
        x = ids(1, 1, info["vocab_size"])

        def call():
            o = model(input_ids=x, past_key_values=cache, use_cache=True, **lk)
            cache.crop(128)
            return o
        run_fwd(call, 2.0)  # warm
        all_cpus = sorted(os.sched_getaffinity(0))
        for pinned in (False, True):
            os.sched_setaffinity(0, {all_cpus[len(all_cpus) // 2]} if pinned else set(all_cpus))
            for what in ("cpu", "fwd", "cpu", "fwd"):
                t0 = time.perf_counter()
                side = None
                if what == "fwd":
                    parent, child = multiprocessing.Pipe()
                    proc = multiprocessing.get_context("fork").Process(
                        target=side_cpu, args=(all_cpus[-1], seconds, child))
                    proc.start()
                rows = run_cpu(seconds) if what == "cpu" else run_fwd(call, seconds)
                if what == "fwd":
                    side = parent.recv()
                    proc.join()
                doc["phases"].append({"what": what, "pinned": pinned, "start": t0, "rows": rows, "side_cpu": side})
                v = sorted(r[1] for r in rows)
                q = lambda p: v[min(len(v) - 1, int(p * len(v)))]  # noqa: E731
                print("%-3s pinned=%d n=%5d p10 %.3f p50 %.3f p90 %.3f ms (p90/p10 %.2f)" % (
                    what, pinned, len(v), q(0.1) * 1e3, q(0.5) * 1e3, q(0.9) * 1e3, q(0.9) / q(0.1)), flush=True)
    sampler.stop = True
    sampler.join()
    doc["samples"] = sampler.rows
    first, last = sampler.rows[0]["stat"], sampler.rows[-1]["stat"]
    tot = sum(last.values()) - sum(first.values())
    print("over the probe: steal %.2f %%, iowait %.2f %% of all CPU time; MHz range %s" % (
        100 * (last["steal"] - first["steal"]) / tot, 100 * (last["iowait"] - first["iowait"]) / tot,
        (min(min(r["mhz"]) for r in sampler.rows if r["mhz"]), max(max(r["mhz"]) for r in sampler.rows if r["mhz"]))
        if any(r["mhz"] for r in sampler.rows) else None), flush=True)
    with open(path, "w") as f:
        json.dump(doc, f)


if __name__ == "__main__":
    main()

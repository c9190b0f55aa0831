#!/usr/bin/env python3
"""Adds the measured attention path of transformers' paged|sdpa to the engine's host calibration.

Inputs (committed, calibration/data/h100-sxm5-80gb/):
  engine-attention-path-2026-11-26.json  measure_attention_path.py: repeat_kv's strided copy,
      per head_dim (32 query, 8 kv heads) (and SDPA at full 64-query tiles, superseded by:);
  sdpa-waves-2026-11-27.json             measure_sdpa_waves.py: SDPA with the engine's strided
      mask at 47 query counts (1 to 8192, at and past tile and wave boundaries) x 4 key counts,
      and the kernel's launch attributes from the profiler;
  serving-engine-profile-2026-11-26.json profile_engine.py: the engine's own iterations under
      torch.profiler (kernels by class, host time of every cuDNN SDPA call).
Writes, per model of the host calibration file (serving-engine-host-2026-11-26.json), an
"attention_path" object that strategies/serving_batch reads (nothing is fitted; each value is
a measurement or a ratio of measured bytes to measured time):
  sdpa: {heads, head_dim, query_rows_per_cta, resident_ctas, mask_row_stride,
      points: [[q, kv, seconds], ...]}: the measured SDPA times with the engine's mask layout
      (interpolated by the model), and the kernel's work decomposition. cuDNN's sm90 flash
      fprop is persistent: the profiler shows a grid of one CTA per SM (resident_ctas = grid
      size = SMs x blocks per SM) of 384 threads, a producer warpgroup and two consumer
      warpgroups, each of which owns one M-row tile of the queries (M = 64, the first figure
      of the kernel's tile in its name, 64x128xD): a CTA's unit of work is
      query_rows_per_cta = (threads / 128 - 1) x M = 128 queries of one head, and the
      units run in waves of resident_ctas. The sweep shows the waves: at 32 heads the 8B's time
      doubles from Q = 512 to 513 (128 -> 160 units, 1 -> 2 waves) and steps again from
      2048 to 2112 (512 -> 544 units, 4 -> 5 waves), which a 64-query unit would not give;
  repeat_kv_copy_Bps: bytes moved (read kv_heads x head_dim, write heads x head_dim per token
      and element) over the measured time of repeat_kv's copy, median over kv >= 16384;
  graph_build_s: host time cuDNN spends building the SDPA graph of a new (q, kv) shape, in the
      engine: median over the profiled iterations of (first SDPA call - median of the others);
      the other layers reuse the graph.

  python3 calibration/serving/engine_attention_path.py HOST_JSON [DATA_DIR]
"""
import json
import os
import re
import statistics
import sys

MODELS = {"llama-1b": 64, "llama-8b": 128}


def sdpa_points(waves, repeat, hd):
    """The SDPA times of one head dim: the sweep's back-to-back time where it took one (calls
    under 2 ms, where an event around one call also counts the host's graph lookup); longer
    calls, timed one by one in both sweeps, the mean of the two (the same shapes on two
    machines of the same kind read 0-4 % apart, a repeat's spread that a mean halves)."""
    first = {(r["q"], r["kv"]): r["seconds"] for r in repeat["results"] if r["head_dim"] == hd}
    out = []
    for r in waves["results"]:
        if r["head_dim"] != hd:
            continue
        r = dict(r)
        if r.get("timing") != "back to back" and (r["q"], r["kv"]) in first:
            r["seconds"] = 0.5 * (r["seconds"] + first[(r["q"], r["kv"])])
        out.append(r)
    return out


def kernel_decomposition(kernels, sms):
    """(query rows per CTA, resident CTAs) of the profiled SDPA kernel: see the module text."""
    if len(kernels) != 1:
        raise ValueError("expected one profiled SDPA kernel, got %d" % len(kernels))
    k = kernels[0]
    args = k["args"]
    grid = args["grid"][0] * args["grid"][1] * args["grid"][2]
    if grid != round(sms * args["blocks per SM"]):
        raise ValueError("%s: grid %d is not SMs x blocks per SM (%d x %s): not a persistent kernel" % (
            k["name"], grid, sms, args["blocks per SM"]))
    threads = args["block"][0] * args["block"][1] * args["block"][2]
    m = re.search(r"_(\d+)x(\d+)x(\d+)_", k["name"])
    if not m or threads % 128:
        raise ValueError("%s: no MxNxD tile in the name or a block of %d threads" % (k["name"], threads))
    return (threads // 128 - 1) * int(m.group(1)), grid


def main():
    host_path = sys.argv[1]
    data = sys.argv[2] if len(sys.argv) > 2 else os.path.dirname(host_path)
    micro_name, prof_name = "engine-attention-path-2026-11-26.json", "serving-engine-profile-2026-11-26.json"
    waves_name, repeat_name = "sdpa-waves-2026-11-27.json", "sdpa-waves-run1-2026-11-27.json"
    micro = json.load(open(os.path.join(data, micro_name)))
    waves = json.load(open(os.path.join(data, waves_name)))
    repeat = json.load(open(os.path.join(data, repeat_name)))
    prof = json.load(open(os.path.join(data, prof_name)))
    host = json.load(open(host_path))
    for model, hd in MODELS.items():
        if model not in host["models"]:  # a calibration of one process holds the models that process ran
            continue
        sdpa = sdpa_points(waves, repeat, hd)
        rows_per_cta, resident = kernel_decomposition(waves["kernels"][model], waves["environment"]["sms"])
        paths = [r for r in micro["results"] if r["kind"] == "path" and r["hd"] == hd and r["kv"] >= 16384]
        rates = [r["kv"] * (8 + 32) * hd * 2 / r["repeat_kv_s"] for r in paths]
        its = prof["models"][model]["iterations"]
        builds = [i["first_sdpa_host_s"] - i["other_sdpa_host_median_s"] for i in its[1:]]  # the first pays cuDNN init
        host["models"][model]["attention_path"] = {
            "source": "calibration/serving/engine_attention_path.py from %s, %s, %s and %s" % (
                micro_name, waves_name, repeat_name, prof_name),
            "sdpa": {"heads": 32, "head_dim": hd, "query_rows_per_cta": rows_per_cta, "resident_ctas": resident,
                     "mask_row_stride": sdpa[0]["mask_row_stride"],
                     "points": [[r["q"], r["kv"], r["seconds"]] for r in sorted(sdpa, key=lambda r: (r["q"], r["kv"]))]},
            "repeat_kv_copy_Bps": statistics.median(rates),
            "graph_build_s": statistics.median(builds),
        }
        print("%s: repeat_kv copy %.3f TB/s (%s), cuDNN graph build %.1f ms (median of %d, range %.1f-%.1f)" % (
            model, statistics.median(rates) / 1e12, ", ".join("%.3f" % (x / 1e12) for x in rates),
            statistics.median(builds) * 1e3, len(builds), min(builds) * 1e3, max(builds) * 1e3))
    with open(host_path, "w") as f:
        json.dump(host, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Adds the measured attention path of transformers' paged|sdpa to the engine's host calibration.

Inputs (committed, calibration/data/h100-sxm5-80gb/):
  engine-attention-path-2026-11-26.json  measure_attention_path.py: SDPA with the engine's
      strided mask over q x kv, repeat_kv's strided copy, per head_dim (32 query, 8 kv heads);
  serving-engine-profile-2026-11-26.json profile_engine.py: the engine's own iterations under
      torch.profiler (kernels by class, host time of every cuDNN SDPA call).
Writes, per model of the host calibration file (serving-engine-host-2026-11-26.json), an
"attention_path" object that strategies/serving_batch reads (nothing is fitted; each value is
a measurement or a ratio of measured bytes to measured time):
  sdpa: {heads, head_dim, query_tile, mask_row_stride, points: [[q, kv, seconds], ...]}: the
      measured SDPA times with the engine's mask layout (interpolated by the model);
  repeat_kv_copy_Bps: bytes moved (read kv_heads x head_dim, write heads x head_dim per token
      and element) over the measured time of repeat_kv's copy, median over kv >= 16384;
  graph_build_s: host time cuDNN spends building the SDPA graph of a new (q, kv) shape, in the
      engine: median over the profiled iterations of (first SDPA call - median of the others);
      the other layers reuse the graph.

  python3 calibration/serving/engine_attention_path.py HOST_JSON [DATA_DIR]
"""
import json
import os
import statistics
import sys

MODELS = {"llama-1b": 64, "llama-8b": 128}


def main():
    host_path = sys.argv[1]
    data = sys.argv[2] if len(sys.argv) > 2 else os.path.dirname(host_path)
    micro_name, prof_name = "engine-attention-path-2026-11-26.json", "serving-engine-profile-2026-11-26.json"
    micro = json.load(open(os.path.join(data, micro_name)))
    prof = json.load(open(os.path.join(data, prof_name)))
    host = json.load(open(host_path))
    for model, hd in MODELS.items():
        if model not in host["models"]:  # a calibration of one process holds the models that process ran
            continue
        sdpa = [r for r in micro["results"] if r["kind"] == "sdpa" and r["hd"] == hd]
        paths = [r for r in micro["results"] if r["kind"] == "path" and r["hd"] == hd and r["kv"] >= 16384]
        rates = [r["kv"] * (8 + 32) * hd * 2 / r["repeat_kv_s"] for r in paths]
        its = prof["models"][model]["iterations"]
        builds = [i["first_sdpa_host_s"] - i["other_sdpa_host_median_s"] for i in its[1:]]  # the first pays cuDNN init
        host["models"][model]["attention_path"] = {
            "source": "calibration/serving/engine_attention_path.py from %s and %s" % (micro_name, prof_name),
            "sdpa": {"heads": 32, "head_dim": hd, "query_tile": 64, "mask_row_stride": sdpa[0]["row_stride"],
                     "points": [[r["q"], r["kv"], r["strided_s"]] for r in sorted(sdpa, key=lambda r: (r["q"], r["kv"]))]},
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

#!/usr/bin/env python3
"""The host's launch time of transformers' eager Llama forward in inference mode, per decoder layer.

The batch-time model's eager floor for an eager serving engine is the host time that launching
the forward takes. The profile's eager_per_kernel was measured on training blocks with autograd
recording, and the model's kernel count is that of its own training graph; transformers' Llama
forward under torch.inference_mode launches its own kernels (679 for the 16-layer 1B decode,
about 42 a layer, profile_batches.py) without autograd. This script measures that host time
directly, on models too short for the per-iteration table (2 and 6 decoder layers, the widths of
the table's 1B and 8B), so that the table stays a held-out check:

  per layer  = (host(6 layers) - host(2 layers)) / 4
  outside    = host(2 layers) - 2 per layer      (embedding, final norm, logits, the cache)

for a decode step (B 1, 32 cached tokens, the cache cropped back after every step) and a prefill
(B 1, 32 tokens, a fresh cache), each the median host time (the call to its return) of the
repeats at the host's fast speed (host_speed.py: the process pinned to one CPU, the probe before
every repeat; README.md "The host's two speeds"), and at its slow speed beside it. Kernel
launches per forward from torch.profiler. The 2- and 6-layer models' repeats alternate, so that
both see the same stretches of the host's speed (run one after the other, 2026-11-28's second
lease saw them in different stretches), and "paired" also gives per layer as the median of the
paired differences of repeats whose probes were both fast.

  python3 calibration/serving/measure_inference_host.py OUT.json
"""
import json
import os
import statistics
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure_batches  # noqa: E402
from host_speed import FAST_RATIO, PROBE, calibrate_probe, cpu_probe, is_fast, split_modes  # noqa: E402
from measure_batches import build_cache, build_model, ids, logits_kwargs, new_cache, timed_host  # noqa: E402

WIDTHS = ("llama-1b", "llama-8b")  # measure_batches.MODELS whose widths the short models take
LAYERS = (2, 6)
TOKENS = 32
REPEATS = 300


def launches(call, after):
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        out = call()
        torch.cuda.synchronize()
    del out
    after()
    return sum(1 for e in prof.events() if e.device_type != torch.autograd.DeviceType.CPU)


def measure_pair(calls):
    """The forwards of both layer counts alternated repeat by repeat, each after its own probe, so
    both see the same stretches of the host's speed: {layers: split_modes record}, and the
    paired differences (more layers - fewer) of the repeats where both probes were fast."""
    hosts = {n: [] for n in calls}
    probes = {n: [] for n in calls}
    for i in range(20 + REPEATS):
        for n, (call, after) in calls.items():
            torch.cuda.synchronize()
            p = cpu_probe()
            _, host, out = timed_host(call)
            del out
            after()
            if i >= 20:
                hosts[n].append(host)
                probes[n].append(p)
    out = {}
    for n in calls:
        r = split_modes(hosts[n], probes[n])
        r["host_s"] = hosts[n]
        r["median_s"] = statistics.median(hosts[n])
        out[n] = r
    lo, hi = LAYERS
    diffs = [y - x for x, y, px, py in zip(hosts[lo], hosts[hi], probes[lo], probes[hi]) if is_fast(px) and is_fast(py)]
    return out, diffs


def measure_width(width_of):
    """Decode and prefill forwards of 2- and 6-layer models of this width (measure_batches.MODELS'
    name), the two models' repeats interleaved. Returns the cases and the paired figures."""
    cases, paired = [], {}
    built = {}
    for layers in LAYERS:
        name = "%s-%dl" % (width_of, layers)
        measure_batches.MODELS[name] = dict(measure_batches.MODELS[width_of], num_hidden_layers=layers)
        built[layers] = build_model(name)
        del measure_batches.MODELS[name]
    with torch.inference_mode():
        forwards = {"decode": {}, "prefill": {}}
        for layers, (model, info) in built.items():
            lk, _ = logits_kwargs(model)
            vocab = info["vocab_size"]
            cache, _ = build_cache(model, 1, TOKENS, vocab, 16384, lk)
            x1 = ids(1, 1, vocab)
            xp = ids(1, TOKENS, vocab)
            forwards["decode"][layers] = (
                lambda model=model, x1=x1, cache=cache, lk=lk: model(input_ids=x1, past_key_values=cache,
                                                                    use_cache=True, **lk),
                lambda cache=cache: cache.crop(TOKENS))
            forwards["prefill"][layers] = (
                lambda model=model, xp=xp, lk=lk: model(input_ids=xp, past_key_values=new_cache(), use_cache=True,
                                                        **lk),
                lambda: None)
        for kind, calls in forwards.items():
            counts = {n: launches(*calls[n]) for n in LAYERS}
            recs, diffs = measure_pair(calls)
            paired[kind] = {"fast_pairs": len(diffs),
                            "per_layer_fast_s": statistics.median(diffs) / (LAYERS[1] - LAYERS[0]) if diffs else None,
                            "launches_per_layer": (counts[LAYERS[1]] - counts[LAYERS[0]]) / (LAYERS[1] - LAYERS[0])}
            for layers in LAYERS:
                rec = {"width_of": width_of, "hidden": built[layers][1]["hidden_size"], "layers": layers,
                       "kind": kind, "launches": counts[layers]}
                rec.update(recs[layers])
                cases.append(rec)
                print("%-9s %dl %-7s launches %4d  host median %.3f ms, fast %s (%d), slow %s (%d)" % (
                    width_of, layers, kind, rec["launches"], rec["median_s"] * 1e3,
                    "%.3f" % (rec["fast_median_s"] * 1e3) if rec["fast_median_s"] else "-", rec["fast_n"],
                    "%.3f" % (rec["slow_median_s"] * 1e3) if rec["slow_median_s"] else "-", rec["slow_n"]),
                    flush=True)
            pl = paired[kind]["per_layer_fast_s"]
            print("%s %-7s paired fast difference: per layer %s ms over %d pairs, %.1f launches a layer" % (
                width_of, kind, "%.3f" % (pl * 1e3) if pl else "-", paired[kind]["fast_pairs"],
                paired[kind]["launches_per_layer"]), flush=True)
    del built, forwards
    torch.cuda.empty_cache()
    return cases, paired


def derive(cases, width_of):
    """Per forward kind and host speed (all repeats, fast, slow): per layer and outside, seconds."""
    out = {}
    for kind in ("decode", "prefill"):
        c = {r["layers"]: r for r in cases if r["width_of"] == width_of and r["kind"] == kind}
        for speed, key in (("all", "median_s"), ("fast", "fast_median_s"), ("slow", "slow_median_s")):
            a, b = c[LAYERS[0]].get(key), c[LAYERS[1]].get(key)
            if not (a and b):
                continue
            per = (b - a) / (LAYERS[1] - LAYERS[0])
            out["%s_%s" % (kind, speed)] = {"per_layer_s": per, "outside_s": a - LAYERS[0] * per}
            print("%s %-7s %-4s: per layer %.3f ms (%.1f launches), outside %.3f ms" % (
                width_of, kind, speed, per * 1e3,
                (c[LAYERS[1]]["launches"] - c[LAYERS[0]]["launches"]) / (LAYERS[1] - LAYERS[0]),
                (a - LAYERS[0] * per) * 1e3), flush=True)
    return out


def main():
    out_path = sys.argv[1]
    allowed = sorted(os.sched_getaffinity(0))
    cpu = allowed[len(allowed) // 2]
    os.sched_setaffinity(0, {cpu})
    calibrate_probe()
    doc = {"format": "clustersim-inference-host/1", "source": "calibration/serving/measure_inference_host.py",
           "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "pinned_cpu": cpu,
           "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "tokens": TOKENS, "repeats": REPEATS,
           "probe_fast_ratio": FAST_RATIO, "cases": []}
    try:
        import transformers
        doc["transformers"] = transformers.__version__
    except ImportError:
        pass
    doc["paired"] = {}
    for width_of in WIDTHS:
        cases, paired = measure_width(width_of)
        doc["cases"] += cases
        doc["paired"][width_of] = paired
    doc["probe_reference_s"] = PROBE["reference_s"]
    doc["per_layer"] = {w: derive(doc["cases"], w) for w in WIDTHS}
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()

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

  python3 calibration/serving/measure_inference_host.py OUT.json [--layers 2,6] [--widths llama-1b,llama-8b]
                                                          [--profile-first]

Launches are counted with torch.profiler after every forward is timed, and each width is
measured in a process of its own: once the profiler has run in a process, its launches cost the
host about 20 % more (README.md, "The profiler's shadow"; --profile-first keeps the old order,
profiler first, for comparison).

--layers takes more than two layer counts (e.g. 2,6,12,24): every count's repeats alternate with
the others', "paired" is taken between the fewest and the most layers as before, and
paired[width][kind]["spans"] gives the same paired figure for each consecutive pair of counts,
so that a host time a layer that depends on the model's depth shows. Every case also keeps its CUDA-event
times ("event_s": from before the call to after it, which bounds the host time from above when
the GPU keeps up).
"""
import argparse
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
LAYERS = [2, 6]  # set from --layers
PROFILE_FIRST = False  # set from --profile-first
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
    events = {n: [] for n in calls}
    probes = {n: [] for n in calls}
    for i in range(20 + REPEATS):
        for n, (call, after) in calls.items():
            torch.cuda.synchronize()
            p = cpu_probe()
            event, host, out = timed_host(call)
            del out
            after()
            if i >= 20:
                hosts[n].append(host)
                events[n].append(event)
                probes[n].append(p)
    out = {}
    for n in calls:
        r = split_modes(hosts[n], probes[n])
        r["host_s"] = hosts[n]
        r["event_s"] = events[n]
        r["median_s"] = statistics.median(hosts[n])
        r["event_median_s"] = statistics.median(events[n])
        out[n] = r

    def fast_diffs(lo, hi):
        return [y - x for x, y, px, py in zip(hosts[lo], hosts[hi], probes[lo], probes[hi]) if is_fast(px) and is_fast(py)]

    spans = {(lo, hi): fast_diffs(lo, hi) for lo, hi in zip(LAYERS, LAYERS[1:])}
    return out, fast_diffs(LAYERS[0], LAYERS[-1]), spans


def measure_width(width_of):
    """Decode and prefill forwards of models of this width (measure_batches.MODELS' name) with
    each of LAYERS' layer counts, their repeats interleaved. Returns the cases and the paired
    figures."""
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
        # Every forward is timed before torch.profiler runs in this process (if it has run, the
        # process's later launches may cost the host more: --profile-first keeps the old order,
        # profiler first, for comparison); launches are counted after.
        counted = {}
        if PROFILE_FIRST:
            counted = {kind: {n: launches(*calls[n]) for n in LAYERS} for kind, calls in forwards.items()}
        timed = {kind: measure_pair(calls) for kind, calls in forwards.items()}
        if not PROFILE_FIRST:
            counted = {kind: {n: launches(*calls[n]) for n in LAYERS} for kind, calls in forwards.items()}
        for kind in forwards:
            counts = counted[kind]
            recs, diffs, spans = timed[kind]
            lo, hi = LAYERS[0], LAYERS[-1]
            paired[kind] = {"fast_pairs": len(diffs),
                            "per_layer_fast_s": statistics.median(diffs) / (hi - lo) if diffs else None,
                            "launches_per_layer": (counts[hi] - counts[lo]) / (hi - lo)}
            if len(LAYERS) > 2:
                paired[kind]["spans"] = [
                    {"layers": [a, b], "fast_pairs": len(d),
                     "per_layer_fast_s": statistics.median(d) / (b - a) if d else None,
                     "launches_per_layer": (counts[b] - counts[a]) / (b - a)} for (a, b), d in spans.items()]
                for sp in paired[kind]["spans"]:
                    print("%s %-7s layers %d-%d: per layer %s ms over %d fast pairs" % (
                        width_of, kind, sp["layers"][0], sp["layers"][1],
                        "%.3f" % (sp["per_layer_fast_s"] * 1e3) if sp["per_layer_fast_s"] else "-",
                        sp["fast_pairs"]), flush=True)
            for layers in LAYERS:
                rec = {"width_of": width_of, "hidden": built[layers][1]["hidden_size"], "layers": layers,
                       "kind": kind, "launches": counts[layers]}
                rec.update(recs[layers])
                cases.append(rec)
                print("%-9s %dl %-7s launches %4d  host median %.3f ms (events %.3f), fast %s (%d), slow %s (%d)" % (
                    width_of, layers, kind, rec["launches"], rec["median_s"] * 1e3, rec["event_median_s"] * 1e3,
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
        lo, hi = LAYERS[0], LAYERS[-1]
        for speed, key in (("all", "median_s"), ("fast", "fast_median_s"), ("slow", "slow_median_s")):
            a, b = c[lo].get(key), c[hi].get(key)
            if not (a and b):
                continue
            per = (b - a) / (hi - lo)
            out["%s_%s" % (kind, speed)] = {"per_layer_s": per, "outside_s": a - lo * per}
            print("%s %-7s %-4s: per layer %.3f ms (%.1f launches), outside %.3f ms" % (
                width_of, kind, speed, per * 1e3,
                (c[hi]["launches"] - c[lo]["launches"]) / (hi - lo),
                (a - LAYERS[0] * per) * 1e3), flush=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--layers", default="2,6", help="decoder layer counts, ascending (default 2,6)")
    ap.add_argument("--widths", default=",".join(WIDTHS),
                    help="the widths to measure (one a process keeps each free of the other's profiler runs)")
    ap.add_argument("--profile-first", action="store_true",
                    help="count launches with torch.profiler before timing (the design before 2026-11-28's fourth session)")
    args = ap.parse_args()
    global PROFILE_FIRST
    PROFILE_FIRST = args.profile_first
    out_path = args.out
    LAYERS[:] = sorted({int(x) for x in args.layers.split(",")})
    if len(LAYERS) < 2 or LAYERS[0] < 1:
        ap.error("--layers: at least two distinct counts >= 1")
    allowed = sorted(os.sched_getaffinity(0))
    cpu = allowed[len(allowed) // 2]
    os.sched_setaffinity(0, {cpu})
    calibrate_probe()
    doc = {"format": "clustersim-inference-host/1", "source": "calibration/serving/measure_inference_host.py",
           "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "pinned_cpu": cpu,
           "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "tokens": TOKENS, "repeats": REPEATS,
           "probe_fast_ratio": FAST_RATIO, "layers": LAYERS,
           "launches_counted": "before timing" if PROFILE_FIRST else "after timing", "cases": []}
    try:
        import transformers
        doc["transformers"] = transformers.__version__
    except ImportError:
        pass
    doc["paired"] = {}
    widths = args.widths.split(",")
    for width_of in widths:
        if width_of not in WIDTHS:
            ap.error("--widths: one of %s" % ", ".join(WIDTHS))
    if len(widths) > 1:
        # One process a width: a width timed after another's launch count would be timed in the
        # profiler's shadow.
        refs = {}
        for width_of in widths:
            sub = measure_in_subprocess(width_of, LAYERS, PROFILE_FIRST)
            doc["cases"] += sub["cases"]
            doc["paired"].update(sub["paired"])
            refs[width_of] = sub["probe_reference_s"]
        doc["process_per_width"] = True
        doc["probe_reference_s_by_width"] = refs
        doc["probe_reference_s"] = min(refs.values())
    else:
        cases, paired = measure_width(widths[0])
        doc["cases"] += cases
        doc["paired"][widths[0]] = paired
        doc["probe_reference_s"] = PROBE["reference_s"]
    doc["per_layer"] = {w: derive(doc["cases"], w) for w in widths}
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)


def measure_in_subprocess(width_of, layers, profile_first=False):
    """This script's document for one width, measured in a fresh Python process (so that no
    profiler has run in it before its timing)."""
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "host.json")
        cmd = [sys.executable, os.path.abspath(__file__), out, "--widths", width_of,
               "--layers", ",".join(str(n) for n in layers)] + (["--profile-first"] if profile_first else [])
        subprocess.run(cmd, check=True)
        with open(out) as f:
            return json.load(f)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Where the host time of measure_batches.py's eager forwards goes, cell by cell.

measure_batches.py times one eager forward of transformers' Llama (DynamicCache, sdpa) per
cell with CUDA events, so a host-bound cell reads the host's launch time. Its 1B cells sit at
18-21 ms where the kernel count times the profile's host time per kernel gives 12.3 ms, and
the 8B's single-request decodes at 1,024 and 4,096 keys at 37 ms against 23 ms at 128 keys.
This script runs the same cells (the same model builder, cache builder and inputs) and, per
cell:
  - times REPEATS forwards with CUDA events (as measure_batches.py) and with the host's clock
    from the call to its return (no synchronisation inside),
  - profiles one forward with torch.profiler (CPU and CUDA): for every aten operator its count
    and CPU time (inclusive), and the GPU kernels by name with their count and time,
  - repeats the event timing with each SDPA backend forced (flash, efficient, cudnn, math),
    where the backend accepts the call,
so that the per-call host cost of the SDPA backend PyTorch chose can be read beside the others.

  python3 calibration/serving/profile_batches.py OUT.json [MODEL:KIND:B:N ...]
KIND is prefill (N prompt tokens), decode (N context tokens) or chunk (a chunk of B tokens of one
request over a past cache of N tokens, as measure_batches.py's chunked cells). Without cells, a
default list.
"""
import collections
import json
import os
import statistics
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure_batches import (build_cache, build_model, contiguous_cache, ids, logits_kwargs, new_cache, provenance,  # noqa: E402
                            timed_host)

DEFAULT = ["llama-8b:decode:1:128", "llama-8b:decode:1:1024", "llama-8b:decode:1:4096", "llama-8b:decode:8:1024",
           "llama-8b:decode:32:128", "llama-8b:decode:128:128", "llama-8b:decode:32:1024", "llama-8b:prefill:1:128",
           "llama-8b:prefill:1:512", "llama-1b:decode:1:128", "llama-1b:decode:8:128", "llama-1b:decode:32:1024",
           "llama-1b:decode:1:4096", "llama-1b:prefill:1:128", "llama-1b:prefill:4:512", "llama-1b:decode:128:1024"]
REPEATS = 9
BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
            "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}


class Args:
    warmup, repeats, build_tokens, chunk_prompt, chunk_passes = 2, REPEATS, 16384, 4096, 3


def forward_fn(model, info, kind, b, n, lk):
    vocab = info["vocab_size"]
    if kind == "prefill":
        x = ids(b, n, vocab)

        def call():
            return model(input_ids=x, past_key_values=new_cache(), use_cache=True, **lk)
        return call, None
    if kind == "chunk":  # a prefill chunk of b tokens over a past cache of n tokens (one request)
        cache, _ = build_cache(model, 1, n, vocab, 16384, lk)
        x = ids(1, b, vocab)

        def call():
            return model(input_ids=x, past_key_values=cache, use_cache=True, **lk)
        return call, (cache, n)
    cache, _ = build_cache(model, b, n, vocab, 16384, lk)
    x = ids(b, 1, vocab)

    def call():
        out = model(input_ids=x, past_key_values=cache, use_cache=True, **lk)
        return out
    return call, (cache, n)


def recrop(state):
    """The cache back to its length, its K and V made contiguous again (as measure_batches.py's
    decode cells: crop() leaves views, whose next torch.cat takes the generic path)."""
    state[0].crop(state[1])
    contiguous_cache(state[0])


def time_calls(call, state, repeats):
    ev, host = [], []
    for i in range(2 + repeats):
        torch.cuda.synchronize()
        t_event, t_host, out = timed_host(call)
        del out
        if state is not None:
            recrop(state)
        if i >= 2:
            ev.append(t_event)
            host.append(t_host)
    return {"event_median_s": statistics.median(ev), "event_s": ev, "host_median_s": statistics.median(host),
            "host_s": host}


def profile_one(call, state):
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        out = call()
        torch.cuda.synchronize()
    del out
    if state is not None:
        recrop(state)
    ops, kernels = collections.defaultdict(lambda: [0, 0.0]), collections.defaultdict(lambda: [0, 0.0])
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CPU:
            o = ops[ev.name]
            o[0] += 1
            o[1] += ev.cpu_time_total / 1e6
        else:
            k = kernels[ev.name[:160]]
            k[0] += 1
            k[1] += ev.device_time_total / 1e6 if hasattr(ev, "device_time_total") else ev.cuda_time_total / 1e6
    top = sorted(ops.items(), key=lambda kv: -kv[1][1])[:60]
    return {"cpu_ops": {k: {"count": v[0], "cpu_total_s": v[1]} for k, v in top},
            "kernels": {k: {"count": v[0], "gpu_total_s": v[1]} for k, v in sorted(kernels.items(), key=lambda kv: -kv[1][1])},
            "kernel_launches": sum(v[0] for v in kernels.values())}


def main():
    out_path = sys.argv[1]
    cells = sys.argv[2:] or DEFAULT
    doc = {"format": "clustersim-serving-batch-profile/1", "source": "calibration/serving/profile_batches.py",
           "provenance": provenance(Args()), "cells": []}
    torch.backends.cuda.matmul.allow_tf32 = True
    models = {}

    def model_of(name):
        if name not in models:
            for other in list(models):
                del models[other]
            torch.cuda.empty_cache()
            models[name] = build_model(name)
        return models[name]

    # Every cell is timed before torch.profiler runs in this process (once it has run, the
    # process's launches cost the host more: README.md, "The profiler's shadow"); the
    # profiles come in a second pass.
    recs = []
    for spec in cells:
        name, kind, b, n = spec.split(":")
        b, n = int(b), int(n)
        model, info = model_of(name)
        lk, _ = logits_kwargs(model)
        rec = {"model": name, "kind": kind, "B": b, "N": n}
        with torch.inference_mode():
            call, state = forward_fn(model, info, kind, b, n, lk)
            rec["default"] = time_calls(call, state, REPEATS)
            rec["forced"] = {}
            for bname, be in BACKENDS.items():
                try:
                    with sdpa_kernel([be]):
                        rec["forced"][bname] = time_calls(call, state, 5)
                except Exception as exc:  # noqa: BLE001
                    rec["forced"][bname] = {"error": repr(exc)[:300]}
                    if state is not None:  # a forward that failed part-way appended to some layers
                        recrop(state)
            del call, state
        torch.cuda.empty_cache()
        recs.append(rec)
        doc["cells"] = recs  # the timings so far, kept if a later cell or the profiles fail
        with open(out_path, "w") as f:
            json.dump(doc, f, indent=1)
    doc["cells"] = []
    for rec in recs:
        model, info = model_of(rec["model"])
        lk, _ = logits_kwargs(model)
        with torch.inference_mode():
            call, state = forward_fn(model, info, rec["kind"], rec["B"], rec["N"], lk)
            time_calls(call, state, 1)  # warm the fresh forward (allocator, cuDNN's graph) first
            rec["profile"] = profile_one(call, state)
            del call, state
        torch.cuda.empty_cache()
        name, kind, b, n = rec["model"], rec["kind"], rec["B"], rec["N"]
        doc["cells"].append(rec)
        sdpa = {k: v for k, v in rec["profile"]["cpu_ops"].items() if "scaled_dot" in k or "attention" in k.lower()}
        print("%s %s B=%d N=%d event %.2f ms host %.2f ms launches %d | %s | forced %s" % (
            name, kind, b, n, rec["default"]["event_median_s"] * 1e3, rec["default"]["host_median_s"] * 1e3,
            rec["profile"]["kernel_launches"],
            " ".join("%s x%d %.2fms" % (k, v["count"], v["cpu_total_s"] * 1e3) for k, v in sdpa.items()),
            " ".join("%s %s" % (k, "%.2f" % (v["event_median_s"] * 1e3) if "event_median_s" in v else "err")
                     for k, v in rec["forced"].items())), flush=True)
        with open(out_path, "w") as f:
            json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()

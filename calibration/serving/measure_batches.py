#!/usr/bin/env python3
"""Per-iteration batch times of a Llama-style model in PyTorch/transformers, for clustersim serve.

Ground truth for the serving batch-time model (issue 15): prefill, decode and chunked-prefill
iterations of Llama-style models built from a config with random weights (nothing is downloaded),
bf16, attention implementation "sdpa", eval mode, torch.inference_mode.

Cases (per model):
  prefill  B x L       one forward of input_ids [B, L], use_cache=True, a fresh DynamicCache per
                       repeat (created outside the timed region); logits only for the last position
                       when the model's forward accepts logits_to_keep / num_logits_to_keep (as a
                       serving engine does), recorded as "logits".
  decode   B x C       KV cache built (untimed) by a prefill of [B, C] in sequence chunks of at most
                       --build-tokens tokens (so activations fit), then ONE decode step (input_ids
                       [B, 1] with that cache) timed per repeat. After every step the cache is
                       cropped back to C (DynamicCache.crop), so every repeat sees context exactly C
                       ("cache_handling": "crop"); without crop the steps run successively and the
                       context grows by one per step ("cache_handling": "successive"). crop leaves
                       each layer's K and V as views of the longer tensor; their next torch.cat then
                       takes PyTorch's strided concatenation (about 0.7 TB/s, measure_eager_kernels.py
                       cat_cropped) where an engine's growing cache is contiguous (2.7 TB/s,
                       cat_cache). So the cropped K and V are copied to contiguous tensors after every
                       step, outside the timed region ("cache_handling": "crop-contiguous");
                       --cropped-view keeps the views (the tables before 2026-11-28's third lease).
                       Cases whose KV cache plus weights clearly exceed the GPU memory are recorded
                       as {"error": "oom", "predicted": true} without trying.
  chunked  K           one request, prompt --chunk-prompt (4096), processed in chunks of K tokens,
                       each chunk a forward with the growing DynamicCache. One untimed warm-up pass,
                       then --chunk-passes timed passes; "median_s"/"min_s"/"max_s" are over the
                       chunks at positions > 0 of all timed passes, "total_*" over the passes, and
                       "per_chunk_median_s" lists the median per chunk position.

Timing: CUDA events recorded around the forward call on the current stream (so host launch
overhead shows up as GPU idle time between the events, as it does in an eager engine); warm-up
forwards first, then the median of >= 5 repeats. The process runs on one CPU (--pin-cpu).

The host's speed (the default; --no-probe leaves it out): the machines' virtual CPUs run in two
speeds, stretches of seconds each, one about 1.8x slower than the other (probe_host_state.py,
README.md "The host's two speeds"): a fixed pure-Python work unit (host_speed.cpu_probe) and a
host-bound forward slow down together. Before every timed forward (every chunk of a chunked
pass) the probe times the work unit on the same thread; "probe_s" lists it per repeat. A repeat
is "fast" when its probe is below FAST_RATIO x the fastest probe the process has seen
(probe_reference_s in the provenance: the fastest of PROBE_CALIBRATION_S of probes at start,
lowered by any faster probe later). Prefill and decode cells repeat until --repeats fast
repeats or --max-repeats or --cell-seconds; chunked cells run passes until --chunk-passes
passes had every later chunk fast or the same limits. Each cell then also has "fast_median_s"
/ "fast_n" and "slow_median_s" / "slow_n" beside the median over all repeats.

With --inference-host, after every cell, measure_inference_host.py's measurement of the eager
forward's host time per decoder layer and outside the layers, on 2- and 6-layer models of each
width, in the same process ("inference_host" in the output; after, because it runs
torch.profiler, which leaves the process's later launches slower on the host). Off by default.

Peak memory: torch.cuda.max_memory_allocated() over the case (peak statistics reset at its start). Each case runs in try/except; an OOM is
recorded as {"error": "oom"} followed by torch.cuda.empty_cache().

Example:
  python3 calibration/serving/measure_batches.py --out serving-batches.json
"""

import argparse
import datetime
import gc
import inspect
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
import traceback

import torch

from host_speed import FAST_RATIO, PROBE, calibrate_probe, cpu_probe, is_fast, split_modes

FORMAT = "clustersim-serving-batches/1"
SOURCE = "calibration/serving/measure_batches.py"
def enough(times, probes, args, t_start):
    fast = sum(1 for p in probes if is_fast(p))
    if fast >= args.repeats and len(times) >= args.repeats:
        return True
    return len(times) >= args.max_repeats or time.time() - t_start > args.cell_seconds


MODELS = {
    "llama-1b": dict(hidden_size=2048, num_hidden_layers=16, num_attention_heads=32,
                     num_key_value_heads=8, intermediate_size=8192, vocab_size=128256,
                     tie_word_embeddings=True),
    "llama-8b": dict(hidden_size=4096, num_hidden_layers=32, num_attention_heads=32,
                     num_key_value_heads=8, intermediate_size=14336, vocab_size=128256,
                     tie_word_embeddings=False),
}


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception as exc:  # noqa: BLE001
        return "error: %s" % exc


def run_provenance(source):
    """Where and how a measurement ran: the script, its command line, the date, the machine."""
    return {
        "source": source,
        "command": " ".join([sys.executable] + sys.argv),
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "host": socket.gethostname(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda_runtime": torch.version.cuda,
    }


def provenance(args):
    import transformers
    prov = dict(run_provenance(SOURCE), **{
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "transformers": transformers.__version__,
        "gpu_name": torch.cuda.get_device_name(0),
        "gpu_total_memory_bytes": torch.cuda.get_device_properties(0).total_memory,
        "gpu_count": torch.cuda.device_count(),
        "nvidia_smi": sh("nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,"
                         "power.limit,memory.total --format=csv,noheader"),
        "driver": sh("nvidia-smi --query-gpu=driver_version --format=csv,noheader").splitlines()[:1],
        "cpu": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "settings": {"warmup": args.warmup, "repeats": args.repeats, "dtype": "bfloat16",
                     "max_repeats": getattr(args, "max_repeats", None), "cell_seconds": getattr(args, "cell_seconds", None),
                     "probe": PROBE["enabled"], "pinned_cpu": getattr(args, "pinned_cpu", None),
                     "attn_implementation": "sdpa", "build_tokens": args.build_tokens,
                     "chunk_prompt": args.chunk_prompt, "chunk_passes": args.chunk_passes},
    })
    # Continuous-batching engine in transformers: only recorded, not run.
    cb = {}
    try:
        import importlib
        importlib.import_module("transformers.generation.continuous_batching")
        cb["module_transformers.generation.continuous_batching"] = True
    except Exception as exc:  # noqa: BLE001
        cb["module_transformers.generation.continuous_batching"] = False
        cb["import_error"] = repr(exc)[:300]
    try:
        from transformers import GenerationMixin
        for name in ("generate_batch", "init_continuous_batching", "continuous_batching_context_manager"):
            cb["GenerationMixin.%s" % name] = hasattr(GenerationMixin, name)
    except Exception as exc:  # noqa: BLE001
        cb["GenerationMixin_error"] = repr(exc)[:300]
    try:
        import transformers as tf
        cb["transformers.ContinuousBatchingManager"] = hasattr(tf, "ContinuousBatchingManager")
    except Exception:  # noqa: BLE001
        pass
    prov["continuous_batching"] = cb
    return prov


def build_model(name):
    from transformers import LlamaConfig, LlamaForCausalLM
    spec = dict(MODELS[name])
    kw = dict(spec, max_position_embeddings=8192 + 512, rope_theta=500000.0, rms_norm_eps=1e-5,
              hidden_act="silu", attention_bias=False, mlp_bias=False)
    try:
        config = LlamaConfig(attn_implementation="sdpa", **kw)
    except TypeError:
        config = LlamaConfig(**kw)
    try:
        config._attn_implementation = "sdpa"
    except Exception:  # noqa: BLE001
        pass
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("cuda"):
            model = LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(old)
    model = model.to(torch.bfloat16).eval()
    with torch.no_grad():  # explicit random weights (finite, whatever the init path did)
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.02)
            else:
                p.fill_(1.0)
    params = sum(p.numel() for p in model.parameters())
    info = dict(spec, name=name, params=params,
                head_dim=spec["hidden_size"] // spec["num_attention_heads"],
                attn_implementation=getattr(model.config, "_attn_implementation", None),
                dtype="bfloat16",
                weight_bytes=torch.cuda.memory_allocated())
    return model, info


def logits_kwargs(model):
    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        params = {}
    for key in ("logits_to_keep", "num_logits_to_keep"):
        if key in params:
            return {key: 1}, key + "=1"
    return {}, "all"


def new_cache():
    from transformers import DynamicCache
    return DynamicCache()


def cache_len(cache):
    try:
        return int(cache.get_seq_length())
    except Exception:  # noqa: BLE001
        return -1


def stats(times):
    return {"median_s": statistics.median(times), "min_s": min(times), "max_s": max(times),
            "n": len(times), "times_s": times}


def timed_host(fn):
    """fn() between two CUDA events: (GPU-side seconds, host seconds from the call to its return, result)."""
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    t0 = time.perf_counter()
    out = fn()
    t1 = time.perf_counter()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1000.0, t1 - t0, out


def timed(fn):
    t, _, out = timed_host(fn)
    return t, out


def ids(b, n, vocab):
    return torch.randint(0, vocab, (b, n), device="cuda", dtype=torch.long)


def case_prefill(model, info, b, l, args, lk):
    vocab = info["vocab_size"]
    x = ids(b, l, vocab)
    times, probes, t_start, i = [], [], time.time(), 0
    while i < args.warmup or not enough(times, probes, args, t_start):
        cache = new_cache()
        torch.cuda.synchronize()
        p = cpu_probe()
        t, out = timed(lambda: model(input_ids=x, past_key_values=cache, use_cache=True, **lk))
        del out, cache
        if i >= args.warmup:
            times.append(t)
            probes.append(p)
        i += 1
    r = stats(times)
    r.update(split_modes(times, probes))
    r["tokens"] = b * l
    r["tokens_per_s"] = b * l / r["median_s"]
    return r


def build_cache(model, b, c, vocab, budget, lk):
    cache = new_cache()
    step = max(1, min(c, budget // max(1, b)))
    pos = 0
    while pos < c:
        n = min(step, c - pos)
        out = model(input_ids=ids(b, n, vocab), past_key_values=cache, use_cache=True, **lk)
        cache = out.past_key_values if getattr(out, "past_key_values", None) is not None else cache
        del out
        pos += n
    torch.cuda.synchronize()
    return cache, step


def contiguous_cache(cache):
    """Each layer's K and V made contiguous (after crop they are views of longer tensors)."""
    layers = getattr(cache, "layers", None)
    if layers is not None:
        for layer in layers:
            for name in ("keys", "values"):
                t = getattr(layer, name, None)
                if t is not None and not t.is_contiguous():
                    setattr(layer, name, t.contiguous())
    else:  # older transformers: key_cache / value_cache lists
        for lst in (getattr(cache, "key_cache", []), getattr(cache, "value_cache", [])):
            for i, t in enumerate(lst):
                if not t.is_contiguous():
                    lst[i] = t.contiguous()
    torch.cuda.synchronize()


def case_decode(model, info, b, c, args, lk):
    vocab = info["vocab_size"]
    kv_bytes = 2 * info["num_hidden_layers"] * info["num_key_value_heads"] * info["head_dim"] * 2 * b * c
    total = torch.cuda.get_device_properties(0).total_memory
    if info["weight_bytes"] + kv_bytes * 1.05 > total * 0.97:
        return {"error": "oom", "predicted": True, "kv_cache_bytes": kv_bytes,
                "reason": "weights + KV cache exceed GPU memory"}
    cache, step = build_cache(model, b, c, vocab, args.build_tokens, lk)
    can_crop = hasattr(cache, "crop")
    x = ids(b, 1, vocab)
    times, probes, t_start, i = [], [], time.time(), 0
    while i < args.warmup or not enough(times, probes, args, t_start):
        p = cpu_probe()
        t, out = timed(lambda: model(input_ids=x, past_key_values=cache, use_cache=True, **lk))
        if getattr(out, "past_key_values", None) is not None:
            cache = out.past_key_values
        del out
        if can_crop:
            cache.crop(c)
            if not args.cropped_view:
                contiguous_cache(cache)
        if i >= args.warmup:
            times.append(t)
            probes.append(p)
        i += 1
    r = stats(times)
    r.update(split_modes(times, probes))
    r.update({"tokens": b, "context": c, "kv_cache_bytes": kv_bytes,
              "cache_handling": ("crop" if args.cropped_view else "crop-contiguous") if can_crop else "successive",
              "context_after": cache_len(cache), "build_chunk_positions": step,
              "tokens_per_s": b / r["median_s"]})
    del cache
    return r


def case_chunked(model, info, k, args, lk):
    vocab = info["vocab_size"]
    p = args.chunk_prompt
    x = ids(1, p, vocab)
    later, later_probes, totals, per_pos = [], [], [], {}
    fast_passes, rep, t_start = 0, 0, time.time()
    while rep <= args.chunk_passes or (fast_passes < args.chunk_passes and rep <= args.max_chunk_passes
                                       and time.time() - t_start < args.cell_seconds):
        cache = new_cache()
        torch.cuda.synchronize()
        tot, pass_fast = 0.0, True
        for j, pos in enumerate(range(0, p, k)):
            chunk = x[:, pos:pos + k]
            pr = cpu_probe()
            t, out = timed(lambda: model(input_ids=chunk, past_key_values=cache, use_cache=True, **lk))
            if getattr(out, "past_key_values", None) is not None:
                cache = out.past_key_values
            del out
            tot += t
            if rep >= 1:
                per_pos.setdefault(j, []).append(t)
                if j > 0:
                    later.append(t)
                    later_probes.append(pr)
                    pass_fast = pass_fast and is_fast(pr)
        del cache
        if rep >= 1:
            totals.append(tot)
            fast_passes += pass_fast
        rep += 1
    if not later:
        later = per_pos.get(0, [float("nan")])
    r = stats(later)
    if later_probes:
        r.update(split_modes(later, later_probes))
    r.update({"tokens": p, "chunk": k, "fast_passes": fast_passes, "chunks": len(per_pos), "prompt": p,
              "total_median_s": statistics.median(totals), "total_min_s": min(totals),
              "total_max_s": max(totals), "total_times_s": totals,
              "per_chunk_median_s": [statistics.median(per_pos[j]) for j in sorted(per_pos)],
              "tokens_per_s": p / statistics.median(totals)})
    return r


def run_case(doc, out_path, model, info, kind, params, fn):
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    rec = {"model": info["name"], "kind": kind}
    rec.update(params)
    t0 = time.time()
    try:
        with torch.inference_mode():
            rec.update(fn())
    except torch.cuda.OutOfMemoryError:
        rec["error"] = "oom"
    except RuntimeError as exc:
        if "out of memory" in str(exc).lower():
            rec["error"] = "oom"
        else:
            rec["error"] = "exception"
            rec["message"] = repr(exc)[:2000]
            traceback.print_exc()
    except Exception as exc:  # noqa: BLE001
        rec["error"] = "exception"
        rec["message"] = repr(exc)[:2000]
        traceback.print_exc()
    rec["max_memory_allocated_bytes"] = torch.cuda.max_memory_allocated()
    rec["case_wall_s"] = round(time.time() - t0, 3)
    gc.collect()
    torch.cuda.empty_cache()
    doc["cases"].append(rec)
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)
    desc = " ".join("%s=%s" % kv for kv in params.items())
    if "error" in rec:
        print("%-9s %-8s %-22s %s%s" % (info["name"], kind, desc, rec["error"],
                                         " (predicted)" if rec.get("predicted") else ""), flush=True)
    else:
        extra = ""
        if kind == "chunked":
            extra = " total %.2f ms" % (rec["total_median_s"] * 1e3)
        if rec.get("fast_median_s") is not None or rec.get("slow_median_s") is not None:
            extra += "  fast %s (%d) slow %s (%d)" % (
                "%.3f" % (rec["fast_median_s"] * 1e3) if rec.get("fast_median_s") is not None else "-", rec["fast_n"],
                "%.3f" % (rec["slow_median_s"] * 1e3) if rec.get("slow_median_s") is not None else "-", rec["slow_n"])
        print("%-9s %-8s %-22s median %9.3f ms  min %9.3f  max %9.3f  %10.0f tok/s  peak %6.2f GiB%s" % (
            info["name"], kind, desc, rec["median_s"] * 1e3, rec["min_s"] * 1e3, rec["max_s"] * 1e3,
            rec["tokens_per_s"], rec["max_memory_allocated_bytes"] / 2**30, extra), flush=True)
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", default="llama-1b,llama-8b")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--prefill-batches", default="1,4,16")
    ap.add_argument("--prefill-lens", default="128,512,2048")
    ap.add_argument("--prefill-max-tokens-8b", type=int, default=32768)
    ap.add_argument("--decode-batches", default="1,8,32,128")
    ap.add_argument("--decode-contexts", default="128,1024,4096")
    ap.add_argument("--chunks", default="256,512,1024,2048")
    ap.add_argument("--chunk-prompt", type=int, default=4096)
    ap.add_argument("--chunk-passes", type=int, default=3)
    ap.add_argument("--pin-cpu", type=int, default=-2,
                    help="run on this one CPU (-2: the middle one of those allowed; -1: no pinning). Unpinned, the "
                         "thread moves between CPUs of both speeds and a forward's time blends them")
    ap.add_argument("--max-repeats", type=int, default=400,
                    help="prefill/decode: stop after this many timed repeats even without --repeats fast ones")
    ap.add_argument("--max-chunk-passes", type=int, default=10)
    ap.add_argument("--cell-seconds", type=float, default=8.0,
                    help="stop a cell's extra repeats (beyond --repeats) after this many seconds")
    ap.add_argument("--inference-host", action="store_true",
                    help="after every cell, measure each model width's eager host time per layer "
                         "(measure_inference_host.py) in this process")
    ap.add_argument("--no-probe", action="store_true",
                    help="no host-speed probe: --repeats repeats, as before 2026-11-28")
    ap.add_argument("--cropped-view", action="store_true",
                    help="decode cells: keep the cache's K and V as crop()'s views (see the docstring)")
    ap.add_argument("--build-tokens", type=int, default=16384,
                    help="max tokens per forward when building a decode KV cache")
    args = ap.parse_args()
    args.repeats = max(5, args.repeats)
    PROBE["enabled"] = not args.no_probe
    allowed = sorted(os.sched_getaffinity(0))
    args.pinned_cpu = None if args.pin_cpu == -1 else (allowed[len(allowed) // 2] if args.pin_cpu == -2 else args.pin_cpu)
    if args.pinned_cpu is not None:
        os.sched_setaffinity(0, {args.pinned_cpu})
    if args.no_probe:
        args.max_repeats, args.max_chunk_passes = args.repeats, args.chunk_passes
    ints = lambda s: [int(v) for v in s.split(",") if v]  # noqa: E731

    torch.backends.cuda.matmul.allow_tf32 = True
    doc = {"format": FORMAT, "provenance": provenance(args), "models": {}, "cases": []}
    if PROBE["enabled"]:
        calibrate_probe()
        doc["provenance"]["probe_fast_ratio"] = FAST_RATIO
    print(json.dumps({k: doc["provenance"][k] for k in ("gpu_name", "nvidia_smi", "torch", "cuda_runtime",
                                                        "transformers", "continuous_batching")}), flush=True)
    for name in args.models.split(","):
        t0 = time.time()
        try:
            model, info = build_model(name)
        except Exception as exc:  # noqa: BLE001
            traceback.print_exc()
            doc["cases"].append({"model": name, "kind": "build", "error": "exception", "message": repr(exc)[:2000]})
            continue
        lk, logits_mode = logits_kwargs(model)
        info["logits"] = logits_mode
        info["build_s"] = round(time.time() - t0, 2)
        try:
            cb = {n: hasattr(model, n) for n in ("generate_batch", "init_continuous_batching")}
            doc["provenance"]["continuous_batching"]["model_has_" + name] = cb
        except Exception:  # noqa: BLE001
            pass
        doc["models"][name] = info
        print("model %s: %.3fB params, attn=%s, logits=%s, weights %.2f GiB, built in %.1f s" % (
            name, info["params"] / 1e9, info["attn_implementation"], logits_mode,
            info["weight_bytes"] / 2**30, info["build_s"]), flush=True)
        is8b = info["hidden_size"] >= 4096
        for b in ints(args.prefill_batches):
            for l in ints(args.prefill_lens):
                if is8b and b * l > args.prefill_max_tokens_8b:
                    continue
                run_case(doc, args.out, model, info, "prefill", {"B": b, "L": l},
                         lambda b=b, l=l: case_prefill(model, info, b, l, args, lk))
        for b in ints(args.decode_batches):
            for c in ints(args.decode_contexts):
                run_case(doc, args.out, model, info, "decode", {"B": b, "C": c},
                         lambda b=b, c=c: case_decode(model, info, b, c, args, lk))
        for k in ints(args.chunks):
            run_case(doc, args.out, model, info, "chunked", {"B": 1, "K": k},
                     lambda k=k: case_chunked(model, info, k, args, lk))
        del model
        gc.collect()
        torch.cuda.empty_cache()
    if args.inference_host:
        # The eager forward's host time per decoder layer and outside the layers, measured in this
        # process on 2- and 6-layer models of each width (measure_inference_host.py), after every
        # cell, each width in a process of its own: it counts launches with torch.profiler, and a
        # process's launches cost the host more once the profiler has run (20 % on these forwards:
        # README.md, "The profiler's shadow"), so nothing here is timed after it. (Until 2026-11-28's fourth session it ran before each model's
        # cells: serving-batches-run2-2026-11-28.json's host-bound cells carry that.)
        from measure_inference_host import LAYERS, measure_in_subprocess
        for name in doc["models"]:
            sub = measure_in_subprocess(name, LAYERS)  # a fresh process a width, as the script does
            doc.setdefault("inference_host", {})[name] = {"cases": sub["cases"], "per_layer": sub["per_layer"][name],
                                                          "paired": sub["paired"][name],
                                                          "probe_reference_s": sub["probe_reference_s"]}
    doc["provenance"]["probe_reference_s"] = PROBE["reference_s"] if PROBE["enabled"] else None
    doc["provenance"]["finished_utc"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    print("wrote %s (%d cases)" % (args.out, len(doc["cases"])), flush=True)


if __name__ == "__main__":
    main()

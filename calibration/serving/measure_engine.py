#!/usr/bin/env python3
"""End-to-end ground truth for clustersim serve: the transformers continuous-batching engine under Poisson load.

Runs the continuous-batching engine that ships with `transformers` (ContinuousBatchingManager, paged KV cache,
see ENGINE.md for what it does) on Llama-style models built from a config with random weights (the configs of
measure_batches.py; nothing is downloaded), one GPU, bf16, attn_implementation "sdpa" (the engine turns it into
"paged|sdpa"), greedy decoding, EOS disabled so that every request produces exactly its output length.

Per model:
  warmup   a few requests, not measured (the engine has no warm-up of its own without CUDA graphs).
  single   --single requests one after the other (prompt --single-prompt, output --single-output): the latency of a
           lone request and the per-iteration time of a batch of one (the engine's fixed host overhead).
  probe    a burst of --probe requests submitted at once; capacity = requests / makespan (requests per second).
  rates    for each fraction f in --fractions: a Poisson trace at rate f x capacity (rounded to 2 significant
           digits), max(50, min(--requests, rate x --max-trace-s)) requests, prompt and output lengths uniform in
           --prompt-range and --output-range (inclusive), seed --seed + 1000 x model index + 100 + run index.
           Requests are submitted by the main thread at their arrival times (add_request); the engine's own
           timestamps are recorded. With --rates 'model=r1,r2;...' the listed rates replace single, probe and
           fractions for those models (run indices start at --label-offset).
  replay   with --replay COMMITTED_JSON: after warmup, single and probe (the inputs of this process's own host fit)
           and ladder (lone requests with the prompt lengths --ladder lists, one every --ladder-gap-s seconds, each
           done before the next arrives: host-bound prefills, recorded, not fitted; README.md "Call J"), the
           committed Poisson traces (same seeds, checked against the committed requests) in the order
           --replay-labels lists them, --passes times (labels RUN-passK): the warm ground truth of README.md.
  pressure first model only, after all models, if --pressure-blocks > 0 and time is left: one trace (at most
           --pressure-requests requests) at --pressure-fraction x capacity with a KV cache of only --pressure-blocks
           blocks (max_batch_tokens kept), so that the admission margin and eviction (soft reset) are exercised.

Recorded per request: planned and actual arrival (the engine's created_time), prompt and output tokens, time the
request was first scheduled, first-token time, finish time, every token's time (record_timestamps), all relative to
the run's start; an evicted (soft-reset) request keeps its arrival and earlier token times (the engine re-creates it
as a new RequestState; the recorder copies those two bookkeeping fields over). Recorded per engine iteration (wrapping the engine's methods, its logic untouched): start, host time
to schedule and build the batch, time to launch the eager forward, time waiting for the GPU, host time to update the
requests, and the batch: requests, query tokens, KV tokens read, prefill requests and tokens, tokens produced, free
blocks, waiting and active requests, evictions. Engine settings (block size, number of blocks, max batch tokens,
scheduler, safety margin, CUDA graphs, async batching, decode fast path, memory fraction) are read back from the
engine after it started.

Outputs (in --out-dir): serving-engine.json (provenance, models, settings, per-request results, summaries),
serving-engine-iterations.json (the iteration logs, columnar), traces.tar (the traces as CSV files
arrival_s,prompt_tokens,output_tokens, one per run, for `clustersim serve` to replay).

The traces depend only on (seed, rate, n, ranges): `--traces-only --rates-from serving-engine.json` rewrites them on
a machine without torch. `--merge DIR...  --date D` joins the outputs of several calls into the committed files
(checking every trace against its seed); `--summarize FILE` prints the README table.

Example:
  python3 calibration/serving/measure_engine.py --out-dir out --models llama-1b,llama-8b
"""

import argparse
import datetime
import gc
import io
import json
import math
import os
import platform
import random
import socket
import statistics
import sys
import tarfile
import threading
import time
import traceback

FORMAT = "clustersim-serving-engine/1"
SOURCE = "calibration/serving/measure_engine.py"


# ----------------------------------------------------------------------------------------------------------------
# Traces (pure Python, no torch: reproducible here and on the GPU machine)

def round_sig(x, digits=2):
    if x <= 0:
        return 0.0
    return round(x, digits - 1 - int(math.floor(math.log10(x))))


def make_trace(seed, rate, n, prompt_range, output_range):
    """Poisson arrivals (exponential gaps of mean 1/rate, first arrival after one gap) and uniform lengths."""
    rng = random.Random(seed)
    t = 0.0
    rows = []
    for _ in range(n):
        t += rng.expovariate(rate)
        p = rng.randint(prompt_range[0], prompt_range[1])
        d = rng.randint(output_range[0], output_range[1])
        rows.append((round(t, 6), p, d))
    return rows


def trace_csv(rows):
    buf = io.StringIO()
    buf.write("arrival_s,prompt_tokens,output_tokens\n")
    for a, p, d in rows:
        buf.write("%.6f,%d,%d\n" % (a, p, d))
    return buf.getvalue()


def trace_name(model, label):
    return "serving-trace-%s-%s.csv" % (model, label)


def write_traces_tar(path, traces):
    with tarfile.open(path, "w") as tar:
        for name in sorted(traces):
            data = traces[name].encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))


def percentile(values, q):
    """Linear interpolation between closest ranks (numpy's default)."""
    v = sorted(values)
    if not v:
        return None
    pos = (len(v) - 1) * q / 100.0
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def summarize(requests, iterations=None):
    ok = [r for r in requests if r.get("error") is None and r.get("first_token_s") is not None]
    out = {"requests": len(requests), "completed": len(ok)}
    if not ok:
        return out
    ttft = [r["first_token_s"] - r["arrival_s"] for r in ok]
    e2e = [r["finish_s"] - r["arrival_s"] for r in ok]
    queue = [r["scheduled_s"] - r["arrival_s"] for r in ok if r.get("scheduled_s") is not None]
    tpot = [(r["finish_s"] - r["first_token_s"]) / (r["output_tokens"] - 1) for r in ok if r["output_tokens"] > 1]
    tbt = []
    for r in ok:
        ts = r.get("token_s") or []
        tbt.extend(b - a for a, b in zip(ts, ts[1:]))
    for name, vals in (("ttft_s", ttft), ("e2e_s", e2e), ("queue_s", queue), ("tpot_s", tpot), ("tbt_s", tbt)):
        if vals:
            out[name] = {"p50": percentile(vals, 50), "p90": percentile(vals, 90), "p99": percentile(vals, 99),
                         "mean": sum(vals) / len(vals), "max": max(vals), "n": len(vals)}
    first = min(r["arrival_s"] for r in ok)
    last = max(r["finish_s"] for r in ok)
    out["window_s"] = last - first
    out["throughput_rps"] = len(ok) / out["window_s"] if out["window_s"] > 0 else None
    out["output_tokens_per_s"] = sum(r["output_tokens"] for r in ok) / out["window_s"] if out["window_s"] > 0 else None
    lag = [r["arrival_s"] - r["planned_arrival_s"] for r in ok if r.get("planned_arrival_s") is not None]
    if lag:
        out["submit_lag_s"] = {"p50": percentile(lag, 50), "max": max(lag)}
    mism = sum(1 for r in ok if r.get("generated_tokens") != r["output_tokens"])
    out["output_length_mismatches"] = mism
    if iterations and iterations.get("t_s"):
        it = iterations
        n = len(it["t_s"])
        wall = [it["prep_s"][i] + it["launch_s"][i] + it["sync_s"][i] + it["update_s"][i] for i in range(n)]
        host = [it["prep_s"][i] + it["launch_s"][i] + it["update_s"][i] for i in range(n)]
        out["iterations"] = {
            "n": n,
            "wall_s": {"p50": percentile(wall, 50), "p90": percentile(wall, 90), "mean": sum(wall) / n},
            "host_share": sum(host) / sum(wall) if sum(wall) > 0 else None,
            "sync_wait_share": sum(it["sync_s"]) / sum(wall) if sum(wall) > 0 else None,
            "requests_per_iteration_mean": sum(it["n_req"]) / n,
            "max_requests_in_batch": max(it["n_req"]),
            "max_q_tokens": max(it["q_tokens"]),
            "min_free_blocks": min(it["free_blocks"]),
            "evictions": sum(it["evicted"]),
        }
    return out


# ----------------------------------------------------------------------------------------------------------------
# Iteration recorder: wraps the engine's methods (its logic is untouched)

class Recorder:
    FIELDS = ("t_s", "prep_s", "launch_s", "sync_s", "update_s", "n_req", "q_tokens", "kv_read", "n_prefill",
              "prefill_tokens", "new_tokens", "free_blocks", "waiting", "active", "evicted")

    def __init__(self, t0, probe=False):
        self.t0 = t0
        self.probe = probe  # time host_speed.cpu_probe on the engine's thread before each iteration
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        with self.lock:
            self.cols = {k: [] for k in self.FIELDS}
            self.cur = None
            self.pending_evictions = 0
            self.evicted_ids = {}
            self.first_scheduled = {}

    def take(self):
        with self.lock:
            cols = self.cols
            self.cols = {k: [] for k in self.FIELDS}
            ev, fs = self.evicted_ids, self.first_scheduled
            self.evicted_ids, self.first_scheduled = {}, {}
            return cols, ev, fs

    def install(self):
        from time import perf_counter
        from transformers.generation.continuous_batching import continuous_api, model_runner, input_outputs
        from transformers.generation.continuous_batching import offloading_manager
        rec = self
        CBP = continuous_api.ContinuousBatchProcessor
        orig_prepare, orig_update = CBP.prepare_next_batch, CBP.update_batch
        MR = model_runner.ModelRunner
        orig_compute = MR.compute_batch
        IOs = input_outputs.ContinuousBatchingIOs
        orig_retrieve = IOs.retrieve_device_outputs
        OM = offloading_manager.OffloadingManager
        orig_offload = OM.offload_requests
        from transformers.generation.continuous_batching import requests as cb_requests
        RS = cb_requests.RequestState
        orig_equiv = RS.create_equivalent_initial_request

        if rec.probe:
            from host_speed import cpu_probe

        def prepare(self_):
            probe_s = cpu_probe() if rec.probe else None
            t = perf_counter()
            ok = orig_prepare(self_)
            t1 = perf_counter()
            if ok:
                io_ = self_.inputs_and_outputs
                reqs = io_.requests_in_batch
                pre = [f for f in reqs if f.query_length > 1]
                rec.cur = {
                    "t_s": round(t - rec.t0, 6), "prep_s": t1 - t, "launch_s": 0.0, "sync_s": 0.0, "update_s": 0.0,
                    "n_req": len(reqs), "q_tokens": int(io_.total_seqlen_q),
                    "kv_read": int(io_.true_read_sizes[0]) if io_.true_read_sizes else 0,
                    "n_prefill": len(pre), "prefill_tokens": sum(f.query_length for f in pre),
                    "new_tokens": sum(1 for f in reqs if f.has_new_token),
                    "free_blocks": int(self_.cache.get_num_free_blocks()),
                    "waiting": len(self_.scheduler.waiting_requests), "active": len(self_.scheduler.active_requests),
                    "evicted": rec.pending_evictions,
                }
                if probe_s is not None:
                    rec.cur["probe_s"] = probe_s
                rec.pending_evictions = 0
            return ok

        def compute(self_, model, batch_data):
            t = perf_counter()
            r = orig_compute(self_, model, batch_data)
            if rec.cur is not None:
                rec.cur["launch_s"] = perf_counter() - t
            return r

        def retrieve(self_):
            t = perf_counter()
            r = orig_retrieve(self_)
            if rec.cur is not None:
                rec.cur["sync_s"] = perf_counter() - t
            return r

        def update(self_):
            t = perf_counter()
            r = orig_update(self_)
            cur = rec.cur
            if cur is not None:
                cur["update_s"] = perf_counter() - t
                with rec.lock:
                    for k in rec.FIELDS + (("probe_s",) if rec.probe else ()):
                        v = cur[k]
                        rec.cols.setdefault(k, []).append(round(v, 7) if isinstance(v, float) else v)
                rec.cur = None
            return r

        def offload(self_):
            n = orig_offload(self_)
            rec.pending_evictions += int(n or 0)
            return n

        def equivalent(self_):
            # A soft-reset (evicted) request is re-created as a new RequestState: keep its arrival time and the times
            # of the tokens it already produced (bookkeeping only, the engine never reads them).
            new = orig_equiv(self_)
            new.created_time = self_.created_time
            new._timestamps = list(self_._timestamps)
            with rec.lock:
                rec.evicted_ids[self_.request_id] = rec.evicted_ids.get(self_.request_id, 0) + 1
                rec.first_scheduled.setdefault(self_.request_id, self_.lifespan[0])
            return new

        CBP.prepare_next_batch, CBP.update_batch = prepare, update
        RS.create_equivalent_initial_request = equivalent
        MR.compute_batch = compute
        IOs.retrieve_device_outputs = retrieve
        OM.offload_requests = offload


# ----------------------------------------------------------------------------------------------------------------
# Engine runs

def engine_settings(manager, model):
    bp = manager.batch_processor
    cfg = manager.continuous_batching_config
    cache = bp.cache
    s = {
        "scheduler_type": cfg.scheduler_type,
        "scheduler_class": type(bp.scheduler).__name__,
        "safety_margin": bp.scheduler.safety_margin,
        "max_requests_per_batch": bp.scheduler.max_requests_per_batch,
        "block_size": cache.block_size,
        "num_blocks": cache.num_blocks,
        "num_pages": cache.num_pages,
        "max_batch_tokens": cache.max_batch_tokens,
        "kv_cache_bytes": sum(t.numel() * t.element_size() for t in cache.key_cache + cache.value_cache),
        "kv_cache_bytes_per_block": 2 * len(cache.key_cache) * cache.block_size * cache.num_key_value_heads
        * cache.head_dim * cache.dtype.itemsize,
        "max_blocks_per_request": cache.max_blocks_per_request,
        "decode_fast_path": cache.max_blocks_per_request > 0,
        "use_cuda_graph": list(cfg.cuda_graph_booleans),
        "use_async_batching": bool(cfg.use_async_batching),
        "varlen_compile": cfg.varlen_compile_config is not None,
        "decode_compile": cfg.decode_compile_config is not None,
        "max_memory_percent": cfg.max_memory_percent,
        "allow_block_sharing": cfg.allow_block_sharing,
        "use_prefix_sharing": cache.use_prefix_sharing,
        "cpu_offload_space_gib": cfg.cpu_offload_space,
        "logits_processing": bool(bp.logit_processor.do_processing),
        "do_sample": bool(bp.do_sample),
        "attn_implementation": getattr(model.config, "_attn_implementation", None),
        "pad_inputs": bool(bp.model_runner.pad_inputs),
    }
    return s


def start_engine(model, args, num_blocks=None, max_batch_tokens=None):
    import torch
    from transformers import GenerationConfig
    from transformers.generation.configuration_utils import ContinuousBatchingConfig
    try:
        gen = GenerationConfig(do_sample=False, max_new_tokens=args.output_range[1], eos_token_id=-1)
    except Exception:  # noqa: BLE001
        gen = GenerationConfig(do_sample=False, max_new_tokens=args.output_range[1])
    kw = dict(scheduler_type=args.scheduler, allow_block_sharing=False, seed=args.seed)
    if args.block_size:
        kw["block_size"] = args.block_size
    if num_blocks:
        kw["num_blocks"] = num_blocks
    if max_batch_tokens:
        kw["max_batch_tokens"] = max_batch_tokens
    cbc = ContinuousBatchingConfig(**kw)
    gc.collect()
    torch.cuda.empty_cache()
    free, total = torch.cuda.mem_get_info()
    mem = {"free_bytes_before_engine": free, "total_bytes": total,
           "allocated_bytes_before_engine": torch.cuda.memory_allocated()}
    manager = model.init_continuous_batching(generation_config=gen, continuous_batching_config=cbc)
    manager.start()
    t = time.time()
    while manager.batch_processor is None:
        if time.time() - t > 120 or not manager.is_running():
            raise RuntimeError("engine did not start")
        time.sleep(0.01)
    settings = engine_settings(manager, model)
    settings.update(mem)
    settings["config_requested"] = kw
    return manager, settings


def stop_engine(manager):
    import torch
    try:
        manager.stop(block=True, timeout=30)
        manager.destroy()
    except Exception:  # noqa: BLE001
        traceback.print_exc()
    gc.collect()
    torch.cuda.empty_cache()


def run_requests(manager, rec, rows, vocab, seed, tag, t_limit_s, clock_t0):
    """Submits rows (arrival_s, prompt, output) at their arrival times (relative to now) and collects the results."""
    from time import perf_counter
    rng = random.Random(seed + 7919)
    prompts = [[rng.randrange(3, vocab) for _ in range(p)] for _, p, _ in rows]
    rec.take()  # drop iterations and eviction records from before this run
    ids = ["%s-%d" % (tag, i) for i in range(len(rows))]
    t0 = perf_counter()
    submitted = [None] * len(rows)
    for i, (a, p, d) in enumerate(rows):
        delay = t0 + a - perf_counter()
        if delay > 0:
            time.sleep(delay)
        submitted[i] = perf_counter()
        manager.add_request(input_ids=prompts[i], request_id=ids[i], max_new_tokens=d, record_timestamps=True,
                            eos_token_id=-1)
    results = {}
    deadline = perf_counter() + t_limit_s
    while len(results) < len(rows) and perf_counter() < deadline:
        r = manager.get_result(timeout=0.5)
        if r is None:
            if not manager.is_running():
                break
            continue
        if r.request_id in results or not r.is_finished():
            continue
        results[r.request_id] = r
    iters, evicted, first_sched = rec.take()
    # iteration start times relative to this run's start
    off = round(t0 - clock_t0, 6)
    iters["t_s"] = [round(x - off, 6) for x in iters["t_s"]]
    out = []
    for i, (a, p, d) in enumerate(rows):
        r = results.get(ids[i])
        e = {"id": i, "planned_arrival_s": a, "prompt_tokens": p, "output_tokens": d}
        if r is None:
            e["error"] = "missing"
        else:
            created = r.created_time
            e["arrival_s"] = round(created - t0, 6)
            e["submitted_s"] = round(submitted[i] - t0, 6)
            e["error"] = r.error
            e["generated_tokens"] = len(r.generated_tokens)
            start, end = r.lifespan
            e["evictions"] = evicted.get(ids[i], 0)
            if ids[i] in first_sched:
                start = first_sched[ids[i]]
            e["scheduled_s"] = round(start - t0, 6) if start > 0 else None
            e["finish_s"] = round(end - t0, 6) if end > 0 else None
            ts = r.timestamps or []
            e["first_token_s"] = round(ts[0] - t0, 6) if ts else None
            e["token_s"] = [round(x - t0, 5) for x in ts]
        out.append(e)
    return out, iters, perf_counter() - t0


def provenance(args):
    import torch
    import transformers
    from measure_batches import run_provenance, sh
    return dict(run_provenance(SOURCE), **{
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "transformers": transformers.__version__,
        "gpu_name": torch.cuda.get_device_name(0),
        "gpu_total_memory_bytes": torch.cuda.get_device_properties(0).total_memory,
        "nvidia_smi": sh("nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,"
                         "power.limit,memory.total --format=csv,noheader"),
        "cpu": sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2").strip(),
        "cpu_count": os.cpu_count(),
        "python_switch_interval_s": sys.getswitchinterval(),
        "environment": {k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "CUDA_CACHE_PATH", "CUDA_CACHE_DISABLE",
                                                       "OMP_NUM_THREADS")},
        "loadavg_start": sh("cat /proc/loadavg"),
        "gpu_clocks_start": sh("nvidia-smi -i 0 --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw "
                               "--format=csv,noheader"),
        "settings": {k: v for k, v in vars(args).items() if k not in ("out_dir",)},
    })


def merge(dirs, out_dir, date):
    """One document from several device calls: provenance per call, engines renumbered, runs tagged with their call."""
    doc = {"format": FORMAT, "calls": [], "models": {}, "engines": [], "runs": []}
    iters = {"format": FORMAT + "-iterations", "fields": list(Recorder.FIELDS), "runs": []}
    traces = {}
    for call, d in enumerate(dirs):
        a = json.load(open(os.path.join(d, "serving-engine.json")))
        b = json.load(open(os.path.join(d, "serving-engine-iterations.json")))
        doc["calls"].append(dict(a["provenance"], call=call))
        for name, info in a["models"].items():
            doc["models"].setdefault(name, info)
        base = len(doc["engines"])
        for e in a.get("engines", []):
            doc["engines"].append(dict(e, _id=base + e["_id"], call=call))
        for r in a["runs"]:
            r = dict(r, call=call)
            if "engine" in r:
                r["engine"] += base
            if "trace" in r:
                rows = [(q["planned_arrival_s"], q["prompt_tokens"], q["output_tokens"]) for q in r["requests"]]
                t = r["trace"]
                if rows != make_trace(t["seed"], t["rate_rps"], t["requests"], t["prompt_range"], t["output_range"]):
                    sys.exit("%s: trace of %s %s does not match its seed" % (d, r["model"], r["label"]))
                traces[t["file"]] = trace_csv(rows)
            doc["runs"].append(r)
        for r in b["runs"]:
            iters["runs"].append(dict(r, call=call))
    os.makedirs(os.path.join(out_dir, "serving-traces"), exist_ok=True)
    with open(os.path.join(out_dir, "serving-engine-%s.json" % date), "w") as f:
        json.dump(doc, f, separators=(",", ":"))
    with open(os.path.join(out_dir, "serving-engine-iterations-%s.json" % date), "w") as f:
        json.dump(iters, f, separators=(",", ":"))
    for name, text in traces.items():
        with open(os.path.join(out_dir, "serving-traces", name), "w") as f:
            f.write(text)
    print("merged %d calls: %d runs, %d traces" % (len(dirs), len(doc["runs"]), len(traces)))


def print_table(doc):
    """The summary table of calibration/serving/README.md (milliseconds, requests/s)."""
    print("| model | run | offered req/s | requests | TTFT p50 / p90 ms | E2E p50 / p90 s | TPOT p50 / p90 ms "
          "| served req/s | max batch | iteration p50 ms | host share |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in doc["runs"]:
        s = r.get("summary")
        if not s or r["kind"] not in ("poisson", "single", "probe"):
            continue
        it = s.get("iterations", {})
        rate = r["trace"]["rate_rps"] if "trace" in r else ("burst" if r["kind"] == "probe" else "-")
        print("| %s | %s | %s | %d | %.0f / %.0f | %.2f / %.2f | %.0f / %.0f | %.2f | %d | %.1f | %.2f |" % (
            r["model"], r["label"], rate, s["completed"], s["ttft_s"]["p50"] * 1e3, s["ttft_s"]["p90"] * 1e3,
            s["e2e_s"]["p50"], s["e2e_s"]["p90"], s["tpot_s"]["p50"] * 1e3, s["tpot_s"]["p90"] * 1e3,
            s["throughput_rps"], it.get("max_requests_in_batch", 0), it["wall_s"]["p50"] * 1e3, it["host_share"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--models", default="llama-1b,llama-8b")
    ap.add_argument("--scheduler", default="fifo", choices=["fifo", "prefill_first"])
    ap.add_argument("--block-size", type=int, default=0, help="0: the engine's default")
    ap.add_argument("--seed", type=int, default=20261126)
    ap.add_argument("--prompt-range", default="64,1024")
    ap.add_argument("--output-range", default="16,256")
    ap.add_argument("--requests", type=int, default=250)
    ap.add_argument("--max-trace-s", type=float, default=40.0)
    ap.add_argument("--fractions", default="0.25,0.5,0.75,1.0")
    ap.add_argument("--warmup", type=int, default=8)
    ap.add_argument("--single", type=int, default=3)
    ap.add_argument("--single-prompt", type=int, default=512)
    ap.add_argument("--single-output", type=int, default=128)
    ap.add_argument("--probe", type=int, default=64)
    ap.add_argument("--ladder", default="64,128,192,256,320,384,448,576,640,704,768",
                    help="replay mode: prompt lengths of lone requests (output --ladder-output) after the probe, one "
                         "every --ladder-gap-s seconds: host-bound prefills of several sizes for the host fit; '' for none")
    ap.add_argument("--ladder-output", type=int, default=3)
    ap.add_argument("--ladder-gap-s", type=float, default=1.0)
    ap.add_argument("--host-probe", action="store_true",
                    help="before each iteration, time host_speed.py's CPU work unit on the engine's thread "
                         "(probe_s in the iteration log: the host's speed then; README.md \"The host's two speeds\")")
    ap.add_argument("--ladder-carrier", type=int, default=0,
                    help="> 0: a request with this many output tokens (prompt 128) starts the ladder a second "
                         "before its first prefill and decodes through it, so that the ladder's prefills join a "
                         "running batch (as a loaded trace's do) instead of waking an idle engine")
    ap.add_argument("--pressure-blocks", type=int, default=48)
    ap.add_argument("--pressure-fraction", type=float, default=0.5)
    ap.add_argument("--pressure-requests", type=int, default=150)
    ap.add_argument("--deadline-s", type=float, default=540.0, help="skip runs that would end after this")
    ap.add_argument("--rates", default="",
                    help="explicit rates per model, e.g. 'llama-1b=8,16;llama-8b=2.5,5': no single/probe runs for "
                         "those models, labels and seeds start at --label-offset")
    ap.add_argument("--label-offset", type=int, default=0)
    ap.add_argument("--replay", default=None,
                    help="a committed serving-engine JSON: after warm-up, single and probe runs (the host fit's "
                         "inputs), replay its Poisson traces (same seeds, checked) instead of new fractions")
    ap.add_argument("--replay-labels", default="",
                    help="with --replay: which runs per model, e.g. 'llama-1b=rate0,rate2;llama-8b=rate4' "
                         "(default: all of the model's traces)")
    ap.add_argument("--passes", type=int, default=1,
                    help="with --replay: replay the traces this many times in one process, pass after pass (labels "
                         "RUN-passK); the first pass meets every new attention shape, later passes run with the "
                         "kernels already built (calibration/serving/README.md, warm ground truth)")
    ap.add_argument("--merge", nargs="+", default=None,
                    help="merge the serving-engine.json (and -iterations.json) of several calls into --out-dir, "
                         "with --date in the file names (no torch)")
    ap.add_argument("--date", default=None)
    ap.add_argument("--summarize", default=None, help="print the README table of a merged serving-engine JSON")
    ap.add_argument("--traces-only", action="store_true", help="rewrite the traces from --rates-from (no torch)")
    ap.add_argument("--rates-from", default=None)
    args = ap.parse_args()
    args.prompt_range = [int(v) for v in args.prompt_range.split(",")]
    args.output_range = [int(v) for v in args.output_range.split(",")]
    os.makedirs(args.out_dir, exist_ok=True)

    if args.merge:
        merge(args.merge, args.out_dir, args.date)
        return
    if args.summarize:
        print_table(json.load(open(args.summarize)))
        return

    if args.traces_only:
        doc = json.load(open(args.rates_from))
        for run in doc["runs"]:
            if "trace" not in run:
                continue
            t = run["trace"]
            rows = make_trace(t["seed"], t["rate_rps"], t["requests"], t["prompt_range"], t["output_range"])
            rec_rows = [(r["planned_arrival_s"], r["prompt_tokens"], r["output_tokens"]) for r in run["requests"]]
            if rows != rec_rows:
                sys.exit("trace of %s does not match its recorded requests" % run["label"])
            with open(os.path.join(args.out_dir, t["file"]), "w") as f:
                f.write(trace_csv(rows))
            print("wrote", t["file"], len(rows))
        return

    t_start = time.time()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import torch
    from measure_batches import build_model
    torch.backends.cuda.matmul.allow_tf32 = True
    from time import perf_counter
    clock_t0 = perf_counter()
    rec = Recorder(clock_t0, probe=args.host_probe)
    rec.install()

    doc = {"format": FORMAT, "provenance": provenance(args), "models": {}, "runs": []}
    iters_doc = {"format": FORMAT + "-iterations", "fields": list(Recorder.FIELDS), "runs": []}
    traces = {}
    out_json = os.path.join(args.out_dir, "serving-engine.json")
    out_iters = os.path.join(args.out_dir, "serving-engine-iterations.json")

    def save():
        with open(out_json, "w") as f:
            json.dump(doc, f, indent=None, separators=(",", ":"))
        with open(out_iters, "w") as f:
            json.dump(iters_doc, f, separators=(",", ":"))
        write_traces_tar(os.path.join(args.out_dir, "traces.tar"), traces)

    def left():
        return args.deadline_s - (time.time() - t_start)

    def do_run(manager, settings, name, vocab, label, kind, rows, seed, trace_meta=None):
        est = (rows[-1][0] if rows else 0) + 30.0
        if est > left():
            print("skip %s %s: needs ~%.0f s, %.0f s left" % (name, label, est, left()), flush=True)
            doc["runs"].append({"model": name, "label": label, "kind": kind, "skipped": "deadline"})
            return None
        reqs, iters, wall = run_requests(manager, rec, rows, vocab, seed, "%s-%s" % (name, label),
                                         max(60.0, left() - 5.0), clock_t0)
        s = summarize(reqs, iters)
        run = {"model": name, "label": label, "kind": kind, "engine": settings["_id"], "wall_s": round(wall, 3),
               "summary": s, "requests": reqs}
        if trace_meta:
            run["trace"] = trace_meta
            traces[trace_meta["file"]] = trace_csv(rows)
        doc["runs"].append(run)
        iters_doc["runs"].append({"model": name, "label": label, "columns": iters})
        save()
        fmt = lambda d: "%.3f/%.3f" % (d["p50"], d["p90"]) if d else "-"  # noqa: E731
        print("%-9s %-12s n=%-4d done=%-4d wall %6.1f s  TTFT p50/p90 %s s  E2E %s s  TPOT %s s  it %s  host %.2f" % (
            name, label, s["requests"], s["completed"], wall, fmt(s.get("ttft_s")), fmt(s.get("e2e_s")),
            fmt(s.get("tpot_s")), s.get("iterations", {}).get("n"),
            s.get("iterations", {}).get("host_share") or float("nan")), flush=True)
        return run

    print(json.dumps({k: doc["provenance"][k] for k in ("gpu_name", "nvidia_smi", "torch", "transformers")}),
          flush=True)
    replay_doc = json.load(open(args.replay)) if args.replay else None
    wanted = {}
    for part in filter(None, args.replay_labels.split(";")):
        m, r = part.split("=")
        wanted[m.strip()] = [v.strip() for v in r.split(",") if v.strip()]

    def replay_runs(model_name):
        """(label, trace metadata) of the committed Poisson runs of one model, each trace checked against its seed, in
        the order --replay-labels lists them (a process's first trace can thus serve to build the attention kernels
        that the later ones reuse)."""
        out = []
        for run in replay_doc["runs"]:
            if run.get("model") != model_name or run.get("kind") != "poisson" or "trace" not in run:
                continue
            if model_name in wanted and run["label"] not in wanted[model_name]:
                continue
            t = run["trace"]
            rows = make_trace(t["seed"], t["rate_rps"], t["requests"], t["prompt_range"], t["output_range"])
            if rows != [(q["planned_arrival_s"], q["prompt_tokens"], q["output_tokens"]) for q in run["requests"]]:
                sys.exit("%s: trace of %s %s does not match its seed" % (args.replay, model_name, run["label"]))
            out.append((run["label"], t))
        if model_name in wanted:
            out.sort(key=lambda lt: wanted[model_name].index(lt[0]))
        return out

    engine_id = 0
    capacities = {}
    explicit = {}
    for part in filter(None, args.rates.split(";")):
        m, r = part.split("=")
        explicit[m.strip()] = [float(v) for v in r.split(",") if v]
    for mi, name in enumerate(args.models.split(",")):
        if left() < 90:
            print("skip model %s: %.0f s left" % (name, left()), flush=True)
            break
        t0 = time.time()
        model, info = build_model(name)
        info["build_s"] = round(time.time() - t0, 2)
        doc["models"][name] = info
        vocab = info["vocab_size"]
        print("model %s: %.3fB params, weights %.2f GiB, built in %.1f s" % (
            name, info["params"] / 1e9, info["weight_bytes"] / 2**30, info["build_s"]), flush=True)
        manager = None
        try:
            manager, settings = start_engine(model, args)
            settings["_id"] = engine_id
            settings["model"] = name
            doc.setdefault("engines", []).append(settings)
            engine_id += 1
            print("engine: %s" % json.dumps({k: settings[k] for k in (
                "scheduler_type", "safety_margin", "block_size", "num_blocks", "max_batch_tokens",
                "max_requests_per_batch", "use_cuda_graph", "use_async_batching", "decode_fast_path",
                "attn_implementation", "kv_cache_bytes")}), flush=True)
            base = args.seed + 1000 * mi
            warm = make_trace(base, 1000.0, args.warmup, args.prompt_range, args.output_range)
            do_run(manager, settings, name, vocab, "warmup", "warmup", warm, base)
            if args.replay:
                # The prelude's single and probe runs give this process's own host fit (fit_engine_host.py).
                for i in range(args.single):
                    do_run(manager, settings, name, vocab, "single%d" % i, "single",
                           [(0.0, args.single_prompt, args.single_output)], base + 10 + i)
                probe_rows = [(0.0, p, d) for _, p, d in make_trace(base + 20, 1.0, args.probe, args.prompt_range,
                                                                      args.output_range)]
                do_run(manager, settings, name, vocab, "probe", "probe", probe_rows, base + 20)
                # Lone prefills of several sizes, each done before the next arrives: launches the GPU did not
                # bound (the probe's burst prefills waited for it), recorded for the host's prefill cost (README.md
                # "Call J"; fit_engine_host.py does not read them).
                ladder = [int(v) for v in args.ladder.split(",") if v.strip()]
                if ladder:
                    lead = 1.0 if args.ladder_carrier > 0 else 0.0
                    rows = [(0.0, 128, args.ladder_carrier)] if args.ladder_carrier > 0 else []
                    rows += [(lead + args.ladder_gap_s * k, p, args.ladder_output) for k, p in enumerate(ladder)]
                    do_run(manager, settings, name, vocab, "ladder", "ladder", rows, base + 30)
                for k in range(1, args.passes + 1):
                    for label, meta in replay_runs(name):
                        rows = make_trace(meta["seed"], meta["rate_rps"], meta["requests"], meta["prompt_range"],
                                          meta["output_range"])
                        run = do_run(manager, settings, name, vocab, "%s-pass%d" % (label, k), "poisson", rows,
                                     meta["seed"], dict(meta))
                        if run is not None:
                            run["replay_of"] = label
                            run["pass"] = k
                            save()
                continue
            if name in explicit:
                for j, rate in enumerate(explicit[name]):
                    fi = args.label_offset + j
                    n = max(50, min(args.requests, int(rate * args.max_trace_s)))
                    seed = base + 100 + fi
                    rows = make_trace(seed, rate, n, args.prompt_range, args.output_range)
                    label = "rate%d" % fi
                    meta = {"seed": seed, "rate_rps": rate, "fraction_of_capacity": None, "requests": n,
                            "arrivals": "poisson", "prompt_range": args.prompt_range,
                            "output_range": args.output_range, "lengths": "uniform inclusive",
                            "file": trace_name(name, "%s-%grps" % (label, rate))}
                    do_run(manager, settings, name, vocab, label, "poisson", rows, seed, meta)
                continue
            single = []
            for i in range(args.single):
                r = do_run(manager, settings, name, vocab, "single%d" % i, "single",
                           [(0.0, args.single_prompt, args.single_output)], base + 10 + i)
                if r:
                    single.append(r)
            probe_rows = [(0.0, p, d) for _, p, d in make_trace(base + 20, 1.0, args.probe, args.prompt_range,
                                                                  args.output_range)]
            pr = do_run(manager, settings, name, vocab, "probe", "probe", probe_rows, base + 20)
            if pr is None or not pr["summary"].get("completed"):
                raise RuntimeError("probe failed")
            ok = [r for r in pr["requests"] if r.get("finish_s") is not None]
            capacity = len(ok) / (max(r["finish_s"] for r in ok) - min(r["arrival_s"] for r in ok))
            pr["capacity_rps"] = capacity
            print("capacity %.2f requests/s" % capacity, flush=True)
            for fi, frac in enumerate(float(f) for f in args.fractions.split(",")):
                rate = round_sig(frac * capacity, 2)
                n = max(50, min(args.requests, int(rate * args.max_trace_s)))
                seed = base + 100 + fi
                rows = make_trace(seed, rate, n, args.prompt_range, args.output_range)
                label = "rate%d" % fi
                meta = {"seed": seed, "rate_rps": rate, "fraction_of_capacity": frac, "requests": n,
                        "arrivals": "poisson", "prompt_range": args.prompt_range,
                        "output_range": args.output_range, "lengths": "uniform inclusive",
                        "file": trace_name(name, "%s-%grps" % (label, rate))}
                do_run(manager, settings, name, vocab, label, "poisson", rows, seed, meta)
            capacities[name] = (capacity, settings["max_batch_tokens"], warm, base)
        except Exception as exc:  # noqa: BLE001
            traceback.print_exc()
            doc["runs"].append({"model": name, "error": repr(exc)[:2000]})
            save()
        finally:
            if manager is not None:
                stop_engine(manager)
            del model
            gc.collect()
            torch.cuda.empty_cache()
    # Pressure run (first model): a small KV cache, so that admission and eviction are exercised.
    first = args.models.split(",")[0]
    if args.pressure_blocks > 0 and first in capacities and left() > 90:
        capacity, mbt, warm, base = capacities[first]
        model, _ = build_model(first)
        vocab = doc["models"][first]["vocab_size"]
        manager = None
        name = first
        try:
            manager, ps = start_engine(model, args, num_blocks=args.pressure_blocks, max_batch_tokens=mbt)
            ps["_id"] = engine_id
            ps["model"] = name
            doc["engines"].append(ps)
            engine_id += 1
            print("pressure engine: num_blocks %d, max_batch_tokens %d" % (ps["num_blocks"],
                                                                          ps["max_batch_tokens"]), flush=True)
            do_run(manager, ps, name, vocab, "pwarmup", "warmup", warm[:2], base + 1)
            rate = round_sig(args.pressure_fraction * capacity, 2)
            n = max(50, min(args.pressure_requests, int(rate * args.max_trace_s)))
            seed = base + 200
            rows = make_trace(seed, rate, n, args.prompt_range, args.output_range)
            meta = {"seed": seed, "rate_rps": rate, "fraction_of_capacity": args.pressure_fraction,
                    "requests": n, "arrivals": "poisson", "prompt_range": args.prompt_range,
                    "output_range": args.output_range, "lengths": "uniform inclusive",
                    "file": trace_name(name, "pressure-%gblocks-%grps" % (ps["num_blocks"], rate))}
            do_run(manager, ps, name, vocab, "pressure", "poisson", rows, seed, meta)
        except Exception as exc:  # noqa: BLE001
            traceback.print_exc()
            doc["runs"].append({"model": name, "label": "pressure", "error": repr(exc)[:2000]})
        finally:
            if manager is not None:
                stop_engine(manager)
            del model
            gc.collect()
            torch.cuda.empty_cache()
    from measure_batches import sh
    doc["provenance"]["loadavg_end"] = sh("cat /proc/loadavg")
    doc["provenance"]["finished_utc"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    save()
    print("wrote %s, %s, traces.tar (%d traces), %.0f s" % (out_json, out_iters, len(traces), time.time() - t_start),
          flush=True)


if __name__ == "__main__":
    main()

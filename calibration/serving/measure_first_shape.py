#!/usr/bin/env python3
"""What makes some iterations of transformers' continuous-batching engine hundreds of ms slower (issue 15).

The engine's iteration log (serving-engine-iterations-2026-11-26.json) has iterations 250-800 ms slower than the
batch-time model: the first iterations whose KV or query count exceeds what the process ran, and lone-request decode
steps at particular KV lengths (1017 and 1024 in two processes and two models). Candidates: cuDNN building or
compiling something for a new SDPA shape, PyTorch's caching allocator growing (cudaMalloc, or freeing its cache and
retrying near the memory limit: the engine sizes its KV cache to 90 % of the free memory), Python's garbage
collector. This script separates them on one GPU.

  sdpa    (fresh process, no model) torch's scaled_dot_product_attention in the engine's call layout
          (integrations/sdpa_paged.py: q [1, 32, Q, hd], K/V repeated to 32 heads, the additive bf16 mask a
          [:Q, :KV] slice of a [1, 1, 8192, slots + 8192] buffer), for
          (a) a lone request's decode, Q = 1, over KV ranges that include the logged stalls, and
          (b) the exact (Q, KV) sequence of a logged engine run (warm-up then a Poisson run, from the iteration
              log: --shapes FILE MODEL CALL LABEL...).
          Per call: host time of the first call of the shape (synchronised before and after), host time of a
          repeated call, and the caching allocator's counters around the first call (cudaMalloc/cudaFree counts,
          retries after a failed cudaMalloc).
  engine  the real engine (measure_engine.py's start_engine, Recorder, run_requests: the same trace seeds as the
          committed call 2) with, per iteration, the host time of the first SDPA call, the allocator's counters
          and the Python garbage collector's pauses (gc.callbacks) inside the forward.

  python3 calibration/serving/measure_first_shape.py sdpa --shapes it.json llama-1b 1 warmup,rate4
  python3 calibration/serving/measure_first_shape.py engine llama-1b 8
  python3 calibration/serving/measure_first_shape.py summarize calibration/data/h100-sxm5-80gb/first-shape-2026-11-27
Options of sdpa: --ranges A-B,... (Q = 1 key ranges), --grid Q1-Q2:KV1-KV2,... (then these query x key ranges).
Environment: CUDA_CACHE_PATH (the driver's JIT cache: its file count is recorded after every call), TAG (file name
suffix), CUDNN_LOGDEST_DBG / CUDNN_FRONTEND_LOG_FILE (log sizes recorded before every call).
Writes $OUT/first-shape-<mode>-<model><TAG>.json. Calls, data and results: README.md, "First-shape stalls".
"""
import datetime
import gc
import json
import os
import platform
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = {  # heads, kv heads, head dim, KV slots of the engine's cache (num_blocks x 256, the committed runs)
    "llama-1b": (32, 8, 64, 5509 * 256),
    "llama-8b": (32, 8, 128, 1501 * 256),
}
# cuDNN's own logs (CUDNN_LOGDEST_DBG, CUDNN_FRONTEND_LOG_FILE), when set: each call records their sizes before it,
# so that what cuDNN logged during a slow first call can be cut out.
LOG_FILES = [os.environ[k] for k in ("CUDNN_LOGDEST_DBG", "CUDNN_FRONTEND_LOG_FILE") if os.environ.get(k, "").startswith("/")]
# The CUDA driver's JIT cache (compiled PTX, keyed by the PTX), when CUDA_CACHE_PATH names a folder: each call records
# how many files it holds after the call, i.e. whether the call made the driver compile a PTX it had not seen.
GRID = []
JIT_FILES_AT_START = None
JIT_CACHE = os.environ.get("CUDA_CACHE_PATH")
ALLOC_KEYS = ("num_device_alloc", "num_device_free", "num_alloc_retries", "num_ooms", "num_sync_all_streams")


def env():
    import torch
    import subprocess
    p = torch.cuda.get_device_properties(0)
    smi = subprocess.run("nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit,memory.total "
                         "--format=csv,noheader", shell=True, capture_output=True, text=True).stdout.strip()
    try:
        import transformers
        tv = transformers.__version__
    except Exception:  # noqa: BLE001
        tv = None
    return dict(gpu=p.name, sms=p.multi_processor_count, nvidia_smi=smi, torch=torch.__version__,
                cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version(), transformers=tv,
                python=platform.python_version(), command=" ".join([sys.executable] + sys.argv),
                date_utc=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))


def alloc_counts(torch):
    s = torch.cuda.memory_stats()
    return {k: int(s.get(k, 0)) for k in ALLOC_KEYS}


def sdpa_mode(model, shapes_file, call, labels, kv_ranges):
    import torch
    import torch.nn.functional as F
    heads, kvh, hd, slots = MODELS[model]
    dev, bf = torch.device("cuda"), torch.bfloat16
    buf = torch.zeros(1, 1, 8192, slots + 8192, dtype=bf, device=dev)

    def call_once(q, kv):
        Q = torch.randn(1, heads, q, hd, dtype=bf, device=dev)
        K = torch.randn(1, kvh, kv, hd, dtype=bf, device=dev)
        K = K[:, :, None].expand(1, kvh, heads // kvh, kv, hd).reshape(1, heads, kv, hd)  # repeat_kv
        V = K.clone()
        mask = buf[..., :q, :kv]
        torch.cuda.synchronize()
        a = alloc_counts(torch)
        logs = [os.path.getsize(f) if os.path.exists(f) else 0 for f in LOG_FILES]
        t = time.perf_counter()
        F.scaled_dot_product_attention(Q, K, V, attn_mask=mask)
        torch.cuda.synchronize()
        first = time.perf_counter() - t
        b = alloc_counts(torch)
        t = time.perf_counter()
        F.scaled_dot_product_attention(Q, K, V, attn_mask=mask)
        torch.cuda.synchronize()
        again = time.perf_counter() - t
        r = dict(q=q, kv=kv, first_s=round(first, 6), repeat_s=round(again, 6),
                 alloc_delta={k: b[k] - a[k] for k in ALLOC_KEYS if b[k] != a[k]})
        if LOG_FILES:
            r["log_offsets"] = logs
        if JIT_CACHE:
            r["jit_cache_files"] = sum(len(f) for _, _, f in os.walk(JIT_CACHE))
        return r

    out = dict(format="clustersim-first-shape/1", mode="sdpa", model=model, environment=env(),
               layout=dict(heads=heads, kv_heads=kvh, head_dim=hd, mask_buffer=[8192, slots + 8192]),
               lone_decode=[], logged_sequence=[])
    t0 = time.time()
    for lo, hi in kv_ranges:
        for kv in range(lo, hi + 1):
            out["lone_decode"].append(call_once(1, kv))
    out["grid"] = []
    for (qlo, qhi), (klo, khi) in GRID:  # query ranges x key ranges, in this order
        for q in range(qlo, qhi + 1):
            for kv in range(klo, khi + 1):
                out["grid"].append(call_once(q, kv))
    print("lone decode: %d calls in %.1f s" % (len(out["lone_decode"]), time.time() - t0), flush=True)
    if shapes_file:
        log = json.load(open(shapes_file))
        for label in labels:
            run = [r for r in log["runs"] if r["model"] == model and r["call"] == call and r["label"] == label][0]
            c = run["columns"]
            for i, (q, kv) in enumerate(zip(c["q_tokens"], c["kv_read"])):
                r = call_once(q, kv)
                r.update(label=label, i=i)
                out["logged_sequence"].append(r)
        print("logged sequence: %d calls, %.1f s total" % (len(out["logged_sequence"]), time.time() - t0), flush=True)
    return out


def engine_mode(model, rate):
    import argparse
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, HERE)
    import measure_engine as me
    from measure_batches import build_model
    from transformers.generation.continuous_batching import model_runner
    torch.backends.cuda.matmul.allow_tf32 = True
    clock_t0 = time.perf_counter()
    rec = me.Recorder(clock_t0)
    rec.install()

    extra = []
    state = dict(first=None, calls=0, sdpa_s=0.0)
    orig_sdpa = F.scaled_dot_product_attention

    def sdpa(*a, **k):
        t = time.perf_counter()
        r = orig_sdpa(*a, **k)
        d = time.perf_counter() - t
        if state["calls"] == 0:
            state["first"] = d
        state["calls"] += 1
        state["sdpa_s"] += d
        return r

    F.scaled_dot_product_attention = sdpa
    torch.nn.functional.scaled_dot_product_attention = sdpa
    gc_pauses = []
    gc_start = {}

    def gc_cb(phase, info):
        if phase == "start":
            gc_start["t"] = time.perf_counter()
        elif "t" in gc_start:
            gc_pauses.append((gc_start.pop("t"), time.perf_counter(), info.get("generation"), info.get("collected")))

    gc.callbacks.append(gc_cb)
    MR = model_runner.ModelRunner
    inner = MR.compute_batch

    def compute(self_, m, batch):
        state.update(first=None, calls=0, sdpa_s=0.0)
        a = alloc_counts(torch)
        reserved = torch.cuda.memory_reserved()
        g0 = len(gc_pauses)
        t = time.perf_counter()
        r = inner(self_, m, batch)
        t1 = time.perf_counter()
        b = alloc_counts(torch)
        cur = rec.cur or {}
        pauses = [p for p in gc_pauses[g0:] if p[0] >= t]
        extra.append(dict(q=cur.get("q_tokens"), kv=cur.get("kv_read"), n=cur.get("n_req"), launch_s=round(t1 - t, 6),
                          first_sdpa_s=round(state["first"], 6) if state["first"] is not None else None,
                          sdpa_calls=state["calls"], sdpa_host_s=round(state["sdpa_s"], 6),
                          gc_s=round(sum(p[1] - p[0] for p in pauses), 6), gc_gens=[p[2] for p in pauses],
                          alloc_delta={k: b[k] - a[k] for k in ALLOC_KEYS if b[k] != a[k]},
                          reserved_delta=torch.cuda.memory_reserved() - reserved))
        return r

    MR.compute_batch = compute
    args = argparse.Namespace(output_range=[16, 256], prompt_range=[64, 1024], scheduler="fifo", seed=20261126,
                              block_size=0)
    m, info = build_model(model)
    for mod in list(sys.modules.values()):  # a module that imported the function by name calls it directly
        if getattr(mod, "__name__", "").startswith("transformers") and \
                getattr(mod, "scaled_dot_product_attention", None) is orig_sdpa:
            mod.scaled_dot_product_attention = sdpa
    manager, settings = me.start_engine(m, args)
    mi = 0 if model == "llama-1b" else 1
    base = args.seed + 1000 * mi
    runs = []
    # The committed call 2: a 4-request warm-up, then the Poisson run rate4 (label offset 4) at `rate`.
    plan = [("warmup", me.make_trace(base, 1000.0, 4, args.prompt_range, args.output_range), base)]
    n = max(50, min(200, int(rate * 20.0)))
    plan.append(("rate4", me.make_trace(base + 104, rate, n, args.prompt_range, args.output_range), base + 104))
    for label, rows, seed in plan:
        extra.clear()
        reqs, iters, wall = me.run_requests(manager, rec, rows, info["vocab_size"], seed, "%s-%s" % (model, label),
                                            120.0, clock_t0)
        s = me.summarize(reqs, iters)
        runs.append(dict(label=label, wall_s=round(wall, 3), summary=s, requests=reqs, iterations=iters,
                         forward=list(extra)))
        print("%s %s: %d iterations, TTFT p50/p90 %s, %d with gc pauses, %d with cudaMalloc" % (
            model, label, len(iters["t_s"]), s.get("ttft_s"), sum(1 for e in extra if e["gc_s"] > 0),
            sum(1 for e in extra if e["alloc_delta"].get("num_device_alloc"))), flush=True)
    settings = {k: v for k, v in settings.items() if isinstance(v, (int, float, str, bool, list, type(None)))}
    jit = os.environ.get("CUDA_CACHE_PATH")
    doc = dict(format="clustersim-first-shape/1", mode="engine", model=model, rate_rps=rate, environment=env(),
               jit_cache=dict(path=jit, files_at_end=sum(len(f) for _, _, f in os.walk(jit)) if jit else None,
                              files_at_start=JIT_FILES_AT_START),
               engine=settings, memory_stats_end={k: v for k, v in torch.cuda.memory_stats().items()
                                                  if k.startswith("num_") or k.endswith(".all.peak")},
               runs=runs)
    return doc


def percentile(v, q):  # numpy's default (linear between order statistics), as the ground-truth test
    v = sorted(v)
    pos = q * (len(v) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (pos - lo) * (v[hi] - v[lo])


def summarize(folder):
    """The README tables from the committed files (no torch)."""
    import glob
    import statistics
    for f in sorted(glob.glob(os.path.join(folder, "*.json"))):
        d = json.load(open(f))
        name = os.path.basename(f)
        if d["mode"] == "sdpa":
            for part in ("lone_decode", "grid", "logged_sequence"):
                rows = d.get(part) or []
                if not rows:
                    continue
                prev, new = 0, []
                for r in rows:
                    files = r.get("jit_cache_files")
                    grew = files is not None and files > prev
                    prev = files if files is not None else prev
                    if grew or r["first_s"] > 0.2:
                        new.append("(%d,%d) %.0f%s" % (r["q"], r["kv"], r["first_s"] * 1e3, " +jit" if grew else ""))
                print("%s %s: %d shapes, first call median %.1f ms, repeat median %.2f ms, cudaMalloc in %d; "
                      "slow or new kernel: %s" % (
                          name, part, len(rows), 1e3 * statistics.median(r["first_s"] for r in rows),
                          1e3 * statistics.median(r["repeat_s"] for r in rows),
                          sum(1 for r in rows if r["alloc_delta"].get("num_device_alloc")), ", ".join(new)))
        else:
            for run in d["runs"]:
                fw, it = run["forward"], run["iterations"]
                busy = sum(sum(it[k]) for k in ("prep_s", "launch_s", "sync_s", "update_s"))
                stalls = ["i%d (%d,%d) %.0f" % (i, x["q"], x["kv"], 1e3 * x["first_sdpa_s"]) for i, x in enumerate(fw)
                          if (x["first_sdpa_s"] or 0) > 0.2]
                line = ("%s %s: %d iterations, busy %.2f s, launch median %.1f ms, first SDPA call median %.1f ms, "
                        "gc %.3f s (max %.1f ms), cudaMalloc in %d, alloc retries %d; first SDPA call > 200 ms: %s" % (
                            name, run["label"], len(fw), busy, 1e3 * statistics.median(it["launch_s"]),
                            1e3 * statistics.median(x["first_sdpa_s"] for x in fw if x["first_sdpa_s"]),
                            sum(x["gc_s"] for x in fw), 1e3 * max(x["gc_s"] for x in fw),
                            sum(1 for x in fw if x["alloc_delta"].get("num_device_alloc")),
                            sum(x["alloc_delta"].get("num_alloc_retries", 0) for x in fw), ", ".join(stalls) or "none"))
                reqs = run.get("requests")
                if reqs and run["label"] != "warmup":
                    tt = [r["first_token_s"] - r["arrival_s"] for r in reqs]
                    e2 = [r["finish_s"] - r["arrival_s"] for r in reqs]
                    line += "; TTFT p50/p90 %.1f/%.1f ms, E2E p50/p90 %.2f/%.2f s" % (
                        1e3 * percentile(tt, 0.5), 1e3 * percentile(tt, 0.9), percentile(e2, 0.5), percentile(e2, 0.9))
                print(line)


def main():
    global JIT_FILES_AT_START
    if sys.argv[1] == "summarize":
        summarize(sys.argv[2])
        return
    if JIT_CACHE:
        JIT_FILES_AT_START = sum(len(f) for _, _, f in os.walk(JIT_CACHE))
    mode, model = sys.argv[1], sys.argv[2]
    out = os.environ.get("OUT", ".")
    if mode == "sdpa":
        shapes, call, labels = None, 0, []
        if "--shapes" in sys.argv:
            k = sys.argv.index("--shapes")
            shapes, call, labels = sys.argv[k + 1], int(sys.argv[k + 2]), sys.argv[k + 3].split(",")
        ranges = [(170, 200), (310, 390), (500, 520), (630, 650), (900, 1100)]
        if "--ranges" in sys.argv:
            spec = sys.argv[sys.argv.index("--ranges") + 1]
            ranges = [tuple(int(v) for v in part.split("-")) for part in spec.split(",")]
        if "--grid" in sys.argv:  # e.g. 2-40:3000-3000,737-737:4900-5200
            spec = sys.argv[sys.argv.index("--grid") + 1]
            for part in spec.split(","):
                qs, ks = part.split(":")
                GRID.append((tuple(int(v) for v in qs.split("-")), tuple(int(v) for v in ks.split("-"))))
        doc = sdpa_mode(model, shapes, call, labels, ranges)
    else:
        doc = engine_mode(model, float(sys.argv[3]))
    tag = os.environ.get("TAG", "")
    with open(os.path.join(out, "first-shape-%s-%s%s.json" % (mode, model, tag)), "w") as f:
        json.dump(doc, f, separators=(",", ":"))
    sys.stdout.flush()
    os._exit(0)  # the engine thread may still be running


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Where the GPU time of transformers' continuous-batching engine goes, iteration by iteration.

Runs the engine (transformers 5.17, paged|sdpa, fifo, default cache sizing, prefix sharing
off; the model of measure_batches.build_model with random weights) under torch.profiler with
profile_all_threads (the engine runs in its own thread) and wraps
ContinuousBatchProcessor.prepare_next_batch and ModelRunner.compute_batch in record_function
ranges named by iteration; a kernel belongs to the iteration whose range holds its launch
(CUPTI correlation id). Waves of requests are submitted at once: WAVES is a JSON list of
[requests, prompt tokens, iterations to record before the next wave]; every request asks
for 3000 tokens, so all are decoding while the profile runs.

On the GPU machine (writes $OUT/trace-MODEL.json.gz and $OUT/shapes-MODEL.json):
  python3 calibration/serving/profile_engine.py run llama-1b '[[64,1400,22],[3,300,6],[40,1000,14]]'
  python3 calibration/serving/profile_engine.py run llama-8b '[[48,1500,18],[3,300,6]]'
Here, from those files (no torch needed):
  python3 calibration/serving/profile_engine.py condense DIR OUT.json
The committed result: calibration/data/h100-sxm5-80gb/serving-engine-profile-2026-11-26.json.
"""
import bisect
import collections
import gzip
import json
import os
import statistics
import sys
import time


def run(name, waves):
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from measure_batches import build_model
    from transformers import GenerationConfig
    from transformers.generation.configuration_utils import ContinuousBatchingConfig
    from transformers.generation.continuous_batching import continuous_api, model_runner

    shapes = []
    cbp, mr = continuous_api.ContinuousBatchProcessor, model_runner.ModelRunner
    orig_prepare, orig_compute = cbp.prepare_next_batch, mr.compute_batch

    def prepare(self):
        with record_function("cbp%d" % len(shapes)):
            ok = orig_prepare(self)
        if ok:
            io = self.inputs_and_outputs
            reqs = io.requests_in_batch
            shapes.append(dict(q=int(io.total_seqlen_q), kv=int(io.true_read_sizes[0]), n=len(reqs),
                               npre=sum(r.query_length > 1 for r in reqs)))
        return ok

    def compute(self, model, batch):
        with record_function("cbi%d" % (len(shapes) - 1)):
            return orig_compute(self, model, batch)

    cbp.prepare_next_batch, mr.compute_batch = prepare, compute
    model, info = build_model(name)
    gen = torch.Generator().manual_seed(1)
    manager = model.init_continuous_batching(
        generation_config=GenerationConfig(do_sample=False, max_new_tokens=4000, eos_token_id=-1),
        continuous_batching_config=ContinuousBatchingConfig(scheduler_type="fifo", allow_block_sharing=False, seed=1))
    manager.start()
    while manager.batch_processor is None:
        time.sleep(0.01)
    config = torch._C._profiler._ExperimentalConfig(profile_all_threads=True)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], experimental_config=config) as prof:
        for w, (n, prompt, iterations) in enumerate(waves):
            for i in range(n):
                ids = torch.randint(3, info["vocab_size"], (prompt,), generator=gen).tolist()
                manager.add_request(input_ids=ids, request_id="%d_%d" % (w, i), max_new_tokens=3000, eos_token_id=-1)
            start = len(shapes)
            while len(shapes) < start + iterations:
                time.sleep(0.002)
        torch.cuda.synchronize()
    manager.stop(block=False)
    out = os.environ.get("OUT", ".")
    prof.export_chrome_trace(os.path.join(out, "trace-%s.json.gz" % name))
    with open(os.path.join(out, "shapes-%s.json" % name), "w") as f:
        json.dump(dict(info=info, iters=shapes), f)
    os._exit(0)  # the engine thread is still in its last iteration


def classify(name):
    if "sdpa" in name or "fmha" in name or "flash" in name:
        return "sdpa"
    if "gather" in name:
        return "gather"
    if "direct_copy" in name and name.startswith("void at::native::elementwise_kernel"):
        return "repeat_kv_copy"
    if "index_copy" in name:
        return "index_copy"
    if "nvjet" in name or "gemm" in name or "cutlass" in name or "splitK" in name:
        return "gemm"
    return "other"


def attribute(trace):
    """Kernel time per (range name, kernel name), and the host durations of the cuDNN SDPA calls per range."""
    events = json.load(gzip.open(trace))["traceEvents"]
    ranges, launch, kernels, sdpa = [], {}, [], []
    for e in events:
        cat, args = e.get("cat"), e.get("args", {})
        if cat == "user_annotation" and e["name"][:2] == "cb":
            ranges.append((e["ts"], e["ts"] + e["dur"], e["name"], e.get("tid")))
        elif cat in ("cuda_runtime", "cuda_driver") and "correlation" in args:
            launch[args["correlation"]] = e["ts"]
        elif cat in ("kernel", "gpu_memcpy", "gpu_memset"):
            kernels.append(e)
        elif cat == "cpu_op" and e["name"] == "aten::_cudnn_attention_forward":
            sdpa.append((e["ts"], e["dur"], e.get("tid")))
    ranges.sort()
    starts = [r[0] for r in ranges]
    by_range = collections.defaultdict(lambda: collections.defaultdict(lambda: [0, 0.0]))
    for k in kernels:
        t = launch.get(k["args"].get("correlation"), -1)
        i = bisect.bisect_right(starts, t) - 1
        if i >= 0 and t <= ranges[i][1]:
            d = by_range[ranges[i][2]][k["name"]]
            d[0] += 1
            d[1] += k["dur"]
    host = {}
    for s, t, name, tid in ranges:
        if name.startswith("cbi"):
            host[name] = sorted((x for x in sdpa if s <= x[0] <= t and x[2] == tid), key=lambda x: x[0])
    return by_range, host


def condense(folder, out_path):
    doc = {"format": "clustersim-serving-engine-profile/1", "source": "calibration/serving/profile_engine.py",
           "models": {}}
    for name in ("llama-1b", "llama-8b"):
        shapes = json.load(open(os.path.join(folder, "shapes-%s.json" % name)))
        by_range, host = attribute(os.path.join(folder, "trace-%s.json.gz" % name))
        rows = []
        for j, s in enumerate(shapes["iters"][:-1]):  # the last iteration ran past the profile
            d = by_range.get("cbi%d" % j, {})
            classes = collections.defaultdict(float)
            for k, v in d.items():
                classes[classify(k)] += v[1] * 1e-6
            calls = [x[1] * 1e-6 for x in host.get("cbi%d" % j, [])]
            rows.append(dict(q_tokens=s["q"], kv_tokens=s["kv"], requests=s["n"], prefill_requests=s["npre"],
                             gpu_s=round(sum(v[1] for v in d.values()) * 1e-6, 7),
                             gpu_by_class_s={k: round(v, 7) for k, v in sorted(classes.items())},
                             prepare_gpu_s=round(sum(v[1] for v in by_range.get("cbp%d" % j, {}).values()) * 1e-6, 7),
                             first_sdpa_host_s=round(calls[0], 6),
                             other_sdpa_host_median_s=round(statistics.median(calls[1:]), 6),
                             kernels={k[:120]: [v[0], round(v[1] * 1e-6, 7)]
                                      for k, v in sorted(d.items(), key=lambda kv: -kv[1][1])}))
        doc["models"][name] = dict(model={k: v for k, v in shapes["info"].items() if k != "weight_bytes"},
                                   iterations=rows)
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)


if __name__ == "__main__":
    if sys.argv[1] == "run":
        run(sys.argv[2], json.loads(sys.argv[3]))
    else:
        condense(sys.argv[2], sys.argv[3])

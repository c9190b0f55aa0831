#!/usr/bin/env python3
"""cuDNN's masked SDPA as transformers' engine calls it, at query counts between and across
its tiles and waves, and the kernel's resources as the profiler reports them.

measure_attention_path.py timed the engine's SDPA (32 query heads, the engine's strided
[Q, KV] bf16 mask) at full 64-query tiles only: Q = 16, 64, 128, ..., 8192. The engine's
batches have any Q (Q = decodes + prefill tokens), and the kernel
(cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128xD: one CTA per
64-query tile and head) runs its CTAs in waves of (SMs x CTAs per SM). This script times
  - Q at and just past tile and wave boundaries (65, 129, 513, 2183, ...), and in between,
  - at KV = 4096, 16384, 65536 and 131072 keys,
  - for head_dim 64 (llama-1b) and 128 (llama-8b), 32 heads,
and profiles one call per head_dim with torch.profiler to record the kernel's grid, block,
registers per thread, shared memory and the profiler's estimated occupancy (from which the
CTAs one SM holds at once follow). `seconds`: where one call takes under 2 ms, 20 calls back
to back behind a 10 ms GPU spin (the host enqueues ahead of the GPU, as in the engine's
forward, where the other layers' kernels are queued: a CUDA event around one call also counts
the host's cuDNN graph lookup, about 50 us, which the GPU waits for only there), median of 5
rounds (measure_sdpa_backends.time_back_to_back); longer calls, the median of 5 calls with
events around each (`per_call_s`, kept for every shape). The first call of each shape (cuDNN
builds its graph) is not timed.

  python3 calibration/serving/measure_sdpa_waves.py   (writes $OUT/sdpa-waves.json)
"""
import datetime
import json
import os
import platform
import sys
import tempfile

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "training"))
from measure_attention_path import timed  # noqa: E402  per-call events, median of 5 after 2 warm-ups
from measure_sdpa_backends import time_back_to_back  # noqa: E402

BF = torch.bfloat16
DEV = torch.device("cuda")
QS = [1, 8, 16, 32, 48, 64, 65, 80, 96, 107, 112, 128, 129, 160, 192, 256, 320, 384, 448, 512, 513, 544, 576,
      640, 704, 768, 832, 896, 964, 1024, 1056, 1088, 1152, 1280, 1536, 1792, 2048, 2112, 2183, 2560, 3072, 3584,
      4096, 4224, 5120, 6144, 8192]
KVS = [4096, 16384, 65536, 131072]
MODELS = (("llama-1b", 64, 5509 * 256), ("llama-8b", 128, 1501 * 256))


def kernel_resources(fn):
    """The SDPA kernel's launch attributes from a profiler trace of one call."""
    from torch.profiler import profile, ProfilerActivity
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    prof.export_chrome_trace(path)
    events = json.load(open(path)).get("traceEvents", [])
    os.unlink(path)
    out = []
    for e in events:
        if e.get("cat") == "kernel" and "sdpa" in e.get("name", ""):
            out.append({"name": e["name"][:200], "dur_us": e.get("dur"), "args": e.get("args", {})})
    return out


def main():
    props = torch.cuda.get_device_properties(0)
    res, kernels = [], {}
    for name, hd, slots in MODELS:
        row = slots + 8192
        buf = torch.zeros(1, 1, 8192, row, dtype=BF, device=DEV)
        for kv in KVS:
            K = torch.randn(1, 32, kv, hd, dtype=BF, device=DEV)
            V = torch.randn(1, 32, kv, hd, dtype=BF, device=DEV)
            for q in QS:
                Q = torch.randn(1, 32, q, hd, dtype=BF, device=DEV)
                mask = buf[..., :q, :kv]
                sdpa = lambda: F.scaled_dot_product_attention(Q, K, V, attn_mask=mask)  # noqa: E731
                r = dict(model=name, head_dim=hd, heads=32, q=q, kv=kv, mask_row_stride=row, per_call_s=timed(sdpa))
                r["seconds"] = r["per_call_s"]
                if r["per_call_s"] < 2e-3:
                    r["seconds"] = time_back_to_back(sdpa, spin_cycles=20_000_000)
                    r["timing"] = "back to back"
                res.append(r)
                print(r, flush=True)
                if kv == 16384 and q == 2048:
                    kernels[name] = kernel_resources(sdpa)
                    print(name, kernels[name], flush=True)
            del K, V
            torch.cuda.empty_cache()
        del buf
        torch.cuda.empty_cache()
    env = dict(gpu=props.name, sms=props.multi_processor_count,
               max_threads_per_sm=getattr(props, "max_threads_per_multi_processor", None),
               shared_memory_per_sm=getattr(props, "shared_memory_per_multiprocessor", None),
               registers_per_sm=getattr(props, "regs_per_multiprocessor", None),
               torch=torch.__version__, cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version(),
               python=platform.python_version(),
               date_utc=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
    doc = dict(format="clustersim-sdpa-waves/1", source="calibration/serving/measure_sdpa_waves.py",
               mask="the engine's layout: a [..., :q, :kv] slice of a zero bf16 [1, 1, 8192, num_slots + 8192] buffer",
               environment=env, kernels=kernels, results=res)
    with open(os.path.join(os.environ.get("OUT", "."), "sdpa-waves.json"), "w") as f:
        json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()

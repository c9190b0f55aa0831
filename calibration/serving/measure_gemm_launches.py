#!/usr/bin/env python3
"""Kernels one bf16 linear (torch.nn.functional.linear, no bias: what transformers' Llama
projections call) launches, over a grid of GEMM shapes.

cuBLAS splits the reduction over K into several CTAs for GEMMs whose output is too small to
fill the GPU (few tokens, a narrow output) and then launches a second kernel that sums the
partial results (cublasLt::splitKreduce_kernel). The host pays for every launch: an eager
decode step of transformers' Llama 8B launches 160 of them (5 a layer) beside its 1,302
other kernels (calibration/data/h100-sxm5-80gb/serving-batch-profile-2026-11-28.json), and its
host time per layer is that much longer than the 1B's, which splits one GEMM a layer
(calibration/data/h200-sxm-141gb/inference-host-2026-11-28.json: 45 and 41 launches a
layer). Which GEMMs split is cuBLAS's heuristic, so it is measured here, not guessed: for
every (M tokens, N outputs, K inputs) of the grid, the kernels three calls launch under
torch.profiler, divided by three, and the kernels' names.

  python3 calibration/serving/measure_gemm_launches.py OUT.json

Writes {"format": "clustersim-gemm-launches/1", "points": [[M, N, K, kernels], ...], ...}.
`clustersim calibrate fit --gemm-launches OUT.json` puts the points in the GPU's profile.
"""
import json
import os
import sys

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure_batches import run_provenance, sh  # noqa: E402

MS = [1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512, 1024, 2048, 4096]
# Widths of the Llama family (hidden, kv projections, MLP) and the vocabulary's logits.
NS = [512, 1024, 2048, 4096, 8192, 14336, 28672, 128256]
KS = [512, 1024, 2048, 4096, 8192, 14336, 28672]
CALLS = 3


def count(x, w):
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(CALLS):
            F.linear(x, w)
        torch.cuda.synchronize()
    names = [e.name for e in prof.events() if e.device_type != torch.autograd.DeviceType.CPU]
    return len(names) / CALLS, sorted(set(names))


def main():
    out = sys.argv[1]
    torch.manual_seed(0)
    points, kernels_seen = [], {}
    for n in NS:
        for k in KS:
            if n * k > 28672 * 128256:
                continue
            w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
            for m in MS:
                x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
                for _ in range(2):
                    F.linear(x, w)
                torch.cuda.synchronize()
                c, names = count(x, w)
                points.append([m, n, k, c])
                kernels_seen["%d,%d,%d" % (m, n, k)] = names
                del x
            del w
            torch.cuda.empty_cache()
        print("N %d done: %d points" % (n, len(points)), flush=True)
    doc = dict(run_provenance("calibration/serving/measure_gemm_launches.py"), **{
        "format": "clustersim-gemm-launches/1",
        "gpu_name": torch.cuda.get_device_name(0),
        "sms": torch.cuda.get_device_properties(0).multi_processor_count,
        "nvidia_smi": sh("nvidia-smi --query-gpu=name,driver_version --format=csv,noheader"),
        "dtype": "bfloat16",
        "call": "torch.nn.functional.linear(x[M, K], w[N, K]), no bias",
        "calls_per_point": CALLS,
        "points_columns": ["M", "N", "K", "kernels per call"],
        "points": points,
        "kernel_names": kernels_seen,
    })
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
    print("wrote %s: %d points" % (out, len(points)))


if __name__ == "__main__":
    main()

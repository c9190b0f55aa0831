#!/usr/bin/env python3
"""Causal bf16 attention, forward and backward, by SDPA backend: FlashAttention-2 and cuDNN.

The fused attention that training runs on an H100 is not always FlashAttention-2:
PyTorch's SDPA puts cuDNN's fused flash attention first on compute capability 9.0 and
10.0 with a recent cuDNN (sdp_utils.cpp check_prefer_cudnn_attention; the committed
kernel profile of two eager training steps on torch 2.11 ran
cudnn_generated_fort_native_sdpa_sm90_flash_fprop/bprop), and Transformer Engine's
DotProductAttention selects FusedAttention (cuDNN) over FlashAttention on Hopper and later
"for performance reasons" (dot_product_attention/utils.py, get_attention_backend). The
sweep profile_step.py committed (sdpa-flash-2026-11-26.json) pinned the flash backend.
This times both backends on the same shapes (that sweep's 30: head dims 64 and 128,
sequences 512-8192, 8-32 heads, batch 16384 / s), both ways: back to back (the host
ahead of the GPU, as in a training step: the curve's times) and with events around each
call (that sweep's method, kept beside them), and a grouped-query variant (8 key/value heads, enable_gqa) of the 128-dim shapes, the layout
of Llama-style models.

Writes one clustersim-sdpa/1 file per backend (`backend`: flash or cudnn):
  python3 measure_sdpa_backends.py --out-dir DIR    # DIR/sdpa-flash.json, DIR/sdpa-cudnn.json
"""
import argparse
import datetime
import json
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from profile_step import sdpa_shapes, time_cuda  # noqa: E402  the sweep's shapes and per-call timing

BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}


def time_back_to_back(fn, calls=20, rounds=5, warm=3, spin_cycles=2_000_000):
    """Back to back: `calls` calls between two events, the host enqueueing ahead of the GPU
    as in a training step (a long kernel queued first lets the host get ahead: spin_cycles
    of GPU spin, 2e6 about 1 ms); median over `rounds` of the time per call."""
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(rounds):
        torch.cuda._sleep(spin_cycles)  # GPU spin: the host queues the calls behind it
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(calls):
            fn()
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e) / 1e3 / calls)
    ts.sort()
    return ts[len(ts) // 2]


def shapes():
    """profile_step.py's sweep (MHA), then grouped-query: 32 query heads over 8 key/value heads."""
    out = [(b, h, h, s, d) for b, h, s, d in sdpa_shapes()]
    out += [(max(1, 16384 // s), 32, 8, s, 128) for s in (1024, 2048, 4096, 8192)]
    return out


def run(backend):
    rows = []
    for b, hq, hkv, s, d in shapes():
        q = torch.randn(b, hq, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        k = torch.randn(b, hkv, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        v = torch.randn_like(k, requires_grad=True)
        gqa = {"enable_gqa": True} if hkv != hq else {}
        row = {"batch": b, "heads": hq, "kv_heads": hkv, "seq": s, "head_dim": d}
        try:
            with sdpa_kernel([BACKENDS[backend]]):
                f = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, **gqa)
                g = torch.randn_like(f())
                fb = lambda: torch.autograd.grad(f(), (q, k, v), g)
                fwd, both = time_back_to_back(f), time_back_to_back(fb)
                fwd_call, both_call = time_cuda(f), time_cuda(fb)
            flops = 4.0 * b * hq * s * s * d / 2  # causal: half the score matrix
            row.update({"forward_s": fwd, "backward_s": both - fwd, "forward_tflops_causal": flops / fwd / 1e12,
                        "backward_tflops_causal": 2.5 * flops / max(both - fwd, 1e-9) / 1e12,
                        "per_call_forward_s": fwd_call, "per_call_backward_s": both_call - fwd_call})
        except RuntimeError as e:  # a backend that does not take the shape: recorded, not timed
            row["error"] = str(e).splitlines()[0][:300]
        rows.append(row)
        print("%-5s %3d %3d/%-3d %5d %4d  %s" % (backend, b, hq, hkv, s, d, "fwd %6.1f  bwd %6.1f TFLOP/s" % (
            row["forward_tflops_causal"], row["backward_tflops_causal"]) if "forward_s" in row else row["error"]),
            flush=True)
        del q, k, v
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out-dir", required=True)
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    props = torch.cuda.get_device_properties(0)
    prov = {"gpu": props.name, "compute_capability": "%d.%d" % (props.major, props.minor), "torch": torch.__version__,
            "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
            "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "script": "calibration/training/measure_sdpa_backends.py",
            "timing": "forward_s/backward_s: 20 calls back to back between two CUDA events behind a 1 ms GPU "
                      "spin (the host queues ahead, as in a training step), median of 5 rounds; per_call_*: CUDA "
                      "events around each call, median of 20 (profile_step.py's method, which counts the host's "
                      "work for the call at short kernels); backward = forward+backward less forward; TFLOP/s "
                      "counts the causal half, backward 2.5x forward"}
    for backend in ("flash", "cudnn"):
        rows = run(backend)
        with open(os.path.join(args.out_dir, "sdpa-%s.json" % backend), "w") as f:
            json.dump({"format": "clustersim-sdpa/1", "backend": backend, "provenance": prov, "results": rows}, f,
                      indent=1)


if __name__ == "__main__":
    main()

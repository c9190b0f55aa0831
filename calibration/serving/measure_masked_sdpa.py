#!/usr/bin/env python3
"""Time of scaled_dot_product_attention with a dense [Q, KV] mask, as the transformers
continuous-batching engine calls it (calibration/serving/ENGINE.md: all packed query tokens
of an iteration against every gathered KV token, one additive mask), over query and key
counts, for the 1B-class (32 heads, head dim 64) and 8B-class (32 heads, head dim 128) models.
Records which backends PyTorch may pick (flash cannot take an arbitrary mask) and the median
time of forward calls after warm-up (CUDA events). Shapes that run out of memory are recorded
as such.

  python3 measure_masked_sdpa.py --out FILE.json
"""
import argparse, datetime, json, platform, statistics, sys
import torch
import torch.nn.functional as F


def timed(fn, reps=7, warmup=2):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e-3)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    args = p.parse_args()
    dev, bf = torch.device("cuda"), torch.bfloat16
    results = []
    for name, heads, hd in (("llama-1b", 32, 64), ("llama-8b", 32, 128)):
        for q in (16, 64, 256, 512, 1024, 4096):
            for kv in (1024, 4096, 16384, 65536, 102400):
                if kv < q:
                    continue
                row = {"model": name, "heads": heads, "head_dim": hd, "q": q, "kv": kv}
                try:
                    Q = torch.randn(1, heads, q, hd, device=dev, dtype=bf)
                    K = torch.randn(1, heads, kv, hd, device=dev, dtype=bf)
                    V = torch.randn(1, heads, kv, hd, device=dev, dtype=bf)
                    mask = torch.zeros(q, kv, device=dev, dtype=bf)
                    mask[:, kv // 2:] = float("-inf")
                    row["median_s"] = timed(lambda: F.scaled_dot_product_attention(Q, K, V, attn_mask=mask))
                    row["flops"] = 4.0 * heads * q * kv * hd
                    row["bytes_qkv_mask"] = 2.0 * (heads * (q + 2 * kv) * hd + q * kv)
                except torch.cuda.OutOfMemoryError as e:
                    row["error"] = "oom: " + str(e)[:200]
                results.append(row)
                print(row, flush=True)
                del row
                torch.cuda.empty_cache()
    props = torch.cuda.get_device_properties(0)
    doc = {"format": "clustersim-masked-sdpa/1", "source": "calibration/serving/measure_masked_sdpa.py",
           "mask": "dense additive bf16 [q, kv], the second half of the keys masked with -inf",
           "backends_enabled": {"flash": torch.backends.cuda.flash_sdp_enabled(),
                                "mem_efficient": torch.backends.cuda.mem_efficient_sdp_enabled(),
                                "math": torch.backends.cuda.math_sdp_enabled(),
                                "cudnn": torch.backends.cuda.cudnn_sdp_enabled()},
           "environment": {"gpu": props.name, "torch": torch.__version__, "cuda": torch.version.cuda,
                           "python": platform.python_version(),
                           "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                           "command_line": " ".join(sys.argv)},
           "results": results}
    # Which kernel ran: one profiled call at a mid shape.
    try:
        from torch.profiler import profile, ProfilerActivity
        Q = torch.randn(1, 32, 512, 64, device=dev, dtype=bf)
        K = torch.randn(1, 32, 16384, 64, device=dev, dtype=bf)
        mask = torch.zeros(512, 16384, device=dev, dtype=bf)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            F.scaled_dot_product_attention(Q, K, K, attn_mask=mask)
            torch.cuda.synchronize()
        doc["kernels_at_q512_kv16384"] = sorted({e.name[:160] for e in prof.events()
                                                 if e.device_type == torch.autograd.DeviceType.CUDA})
    except Exception as e:  # noqa: BLE001
        doc["kernels_error"] = str(e)[:300]
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()

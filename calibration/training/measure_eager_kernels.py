#!/usr/bin/env python3
"""Bandwidth of eager PyTorch's elementwise kernels by the path TensorIterator takes.

Training profiles (calibration/README.md, "Kernel profiles of nine runs") show eager kernels
on strided or broadcast operands (RoPE's x[..., :d] * cos, silu on a chunk() of a fused
projection, transposed layout copies, bf16->fp32 casts) moving 1.4-1.6 TB/s where the
microbenchmark's vectorized kernels move 3.1 TB/s. This measures each path over sizes,
with CUDA events (median of repeats after warm-up), bytes counted as each input read once
plus each output written once:

  contiguous   a * b, both contiguous bf16 (vectorized path)
  strided      x[..., :d] * c, x a [rows, 2d] bf16 tensor, c a [rows, d] bf16 tensor
  broadcast    x * c, x [b, h, t, d] bf16, c [t, d] bf16 broadcast over b and h
  silu_chunk   silu(g) with g = y.chunk(2, -1)[0] of a [rows, 2f] bf16 tensor
  transpose    x.transpose(1, 2).contiguous(), x [b, t, h, d] bf16
  cast_up      x.float(), x contiguous bf16 (LoadWithCast unrolled path)
  cast_down    x.to(bf16), x contiguous fp32
  add_mixed    a + b with a fp32 and b bf16 (type promotion)
  cat_cache    torch.cat([cache, new], dim=-2): cache a contiguous [b, h, s, d] bf16 tensor, new one
               token [b, h, 1, d] viewed from a [b, 1, h, d] tensor (transformers' DynamicCache
               update: the key or value after rotary keeps the projection's [b, s, h, d] layout)
  cat_cropped  cat_cache with the cache a [b, h, s, d] view of a [b, h, s + 1, d] tensor (the cache after
               DynamicCache.crop(s), as measure_batches.py's decode cells without --contiguous-cache)
  cat_first    torch.cat([empty, k], dim=-2), k a [b, h, s, d] view of a [b, s, h, d] tensor (a fresh
               DynamicCache's first update in a prefill)
  cat_halves   torch.cat((n2, x1), dim=-1): x a [b, h, s, d] view of a [b, s, h, d] tensor, x1 its
               first half of d, n2 = -(second half) made beforehand (rotate_half's concatenation)

--kinds limits the run to some of these (comma-separated); the default runs all.

Timing one launch between two events on an idle GPU includes the host's dispatch of the op
(15-20 us from Python: the times are flat up to 32 MB), which a forward whose kernels queue ahead
of the GPU does not pay. --graphs times 20 launches of the op captured in one CUDA graph instead:
the kernels' own time ("timing": "cuda-graph" in the output).

  python3 measure_eager_kernels.py --out FILE.json
"""
import argparse, datetime, json, platform, statistics, sys
import torch
import torch.nn.functional as F

GRAPHS = {"on": False}


def timed_graph(fn, reps=15, launches=20):
    """The op's kernel time without the host: `launches` copies of it captured in one CUDA graph,
    replayed between two events; per launch = replay time / launches (median of reps)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(launches):
            fn()  # each output freed at once: the graph's pool reuses its memory
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e-3 / launches)
    del g
    return statistics.median(times), min(times)


def timed(fn, reps=15, warmup=3):
    if GRAPHS["on"]:
        return timed_graph(fn, reps)
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
    return statistics.median(times), min(times)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--kinds", default="", help="comma-separated subset of the kinds above (default: all)")
    p.add_argument("--graphs", action="store_true",
                   help="time each op as 20 launches captured in one CUDA graph (no host dispatch between them)")
    args = p.parse_args()
    GRAPHS["on"] = args.graphs
    only = set(k for k in args.kinds.split(",") if k)
    dev = torch.device("cuda")
    bf, f32 = torch.bfloat16, torch.float32
    results = []

    def record(kind, elements, nbytes, fn, shape):
        if only and kind not in only:
            return
        med, best = timed(fn)
        results.append({"kernel": kind, "elements": elements, "bytes": nbytes, "shape": shape,
                        "median_s": med, "min_s": best, "bandwidth_Bps": nbytes / med})

    for log2 in range(20, 30):  # 1M .. 512M elements of output
        n = 1 << log2
        d = 64
        rows = n // d
        x = torch.randn(rows, 2 * d, device=dev, dtype=bf)
        c = torch.randn(rows, d, device=dev, dtype=bf)
        a = torch.randn(n, device=dev, dtype=bf)
        b = torch.randn(n, device=dev, dtype=bf)
        record("contiguous", n, 3 * 2 * n, lambda: a * b, [n])
        record("strided", n, 3 * 2 * n, lambda: x[..., :d] * c, [rows, 2 * d])
        t = 2048
        bh = max(1, n // (t * d))
        xb = torch.randn(bh, 1, t, d, device=dev, dtype=bf).expand(bh, 1, t, d).contiguous()
        cb = torch.randn(t, d, device=dev, dtype=bf)
        record("broadcast", bh * t * d, 2 * 2 * bh * t * d + 2 * t * d, lambda: xb * cb, [bh, 1, t, d])
        fw = 1024
        y = torch.randn(max(1, n // fw), 2 * fw, device=dev, dtype=bf)
        record("silu_chunk", y.shape[0] * fw, 2 * 2 * y.shape[0] * fw, lambda: F.silu(y.chunk(2, -1)[0]),
               list(y.shape))
        h = 16
        tb = max(1, n // (t * h * d))
        xt = torch.randn(tb, t, h, d, device=dev, dtype=bf)
        record("transpose", xt.numel(), 2 * 2 * xt.numel(), lambda: xt.transpose(1, 2).contiguous(), list(xt.shape))
        record("cast_up", n, 6 * n, lambda: a.float(), [n])
        af = torch.randn(n, device=dev, dtype=f32)
        record("cast_down", n, 6 * n, lambda: af.to(bf), [n])
        record("add_mixed", n, (4 + 2 + 4) * n, lambda: af + a, [n])
        kb, kh, kd = 4, 8, 128
        ks = max(1, n // (kb * kh * kd))
        cache = torch.randn(kb, kh, ks, kd, device=dev, dtype=bf)
        new = torch.randn(kb, 1, kh, kd, device=dev, dtype=bf).transpose(1, 2)
        record("cat_cache", cache.numel() + new.numel(), 2 * 2 * (cache.numel() + new.numel()),
               lambda: torch.cat([cache, new], dim=-2), [kb, kh, ks, kd])
        cropped = torch.randn(kb, kh, ks + 1, kd, device=dev, dtype=bf)[:, :, :ks, :]
        record("cat_cropped", cropped.numel() + new.numel(), 2 * 2 * (cropped.numel() + new.numel()),
               lambda: torch.cat([cropped, new], dim=-2), [kb, kh, ks, kd])
        xh = torch.randn(kb, ks, kh, kd, device=dev, dtype=bf).transpose(1, 2)
        empty = torch.tensor([], device=dev, dtype=bf)
        record("cat_first", xh.numel(), 2 * 2 * xh.numel(), lambda: torch.cat([empty, xh], dim=-2), [kb, kh, ks, kd])
        x1, n2 = xh[..., : kd // 2], -xh[..., kd // 2:]
        record("cat_halves", xh.numel(), 2 * 2 * xh.numel(), lambda: torch.cat((n2, x1), dim=-1), [kb, kh, ks, kd])
        del x, c, a, b, xb, cb, y, xt, af, cache, new, cropped, xh, x1, n2, empty
        torch.cuda.empty_cache()
        print("2^%d done" % log2, flush=True)

    props = torch.cuda.get_device_properties(0)
    doc = {"format": "clustersim-eager-kernels/1", "source": "calibration/training/measure_eager_kernels.py",
           "timing": "cuda-graph" if args.graphs else "single-launch",
           "bytes_convention": "each input read once + each output written once; broadcast operands once",
           "environment": {"gpu": props.name, "torch": torch.__version__, "cuda": torch.version.cuda,
                           "python": platform.python_version(),
                           "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                           "command_line": " ".join(sys.argv)},
           "results": results}
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    big = {}
    for r in results:
        big[r["kernel"]] = r["bandwidth_Bps"]
    print("largest size, GB/s:", ", ".join("%s %.0f" % (k, v / 1e9) for k, v in big.items()))


if __name__ == "__main__":
    main()

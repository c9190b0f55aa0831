#!/usr/bin/env python3
"""GEMM speed under a training step's duty cycle, against the sustained sweep.

clustersim-microbench times GEMMs back to back for tens of seconds: the H100 then sits
at its 700 W power limit and its SM clock falls to about 1.4-1.5 GHz. In a training step
the GEMMs alternate with memory-bound kernels, attention and communication, which draw
less power, so the clock stays higher while the GEMMs run. This measures, at steady state
(each regime held for `--settle` seconds before timing):

  sustained   GEMMs back to back (the sweep's regime)
  duty        each GEMM followed by a memory-bound copy of about the same length
              (a training step's mix: GEMMs about half of the GPU time)

on the profiled runs' shapes, samples SM clock and power with nvidia-smi, and then
re-times every bf16 shape of a clustersim-microbench file (`--shapes`) in the duty regime
through torch (the library path training uses), written as a clustersim-microbench/1
file whose bf16 GEMM results replace the sweep's (other sections copied, provenance
added), so that `clustersim calibrate fit` can fit the GEMM curve to it.

With `--dtypes bf16,fp8` the sweep's fp8 shapes (e4m3 A and B, bf16 out, unit scales, with
and without fast accumulation, as the sweep timed them through cuBLASLt) are re-timed too,
through `torch._scaled_mm` (cuBLASLt's fp8 GEMM, the call Transformer Engine's layers reach),
and the regime shapes are held in fp8 as well: the sweep ran its fp8 section at the power
limit (SM clock 1.26-1.41 GHz in smi-microbench-gemm-rerun-2026-11-26.csv) while a training
step's fp8 GEMMs alternate with memory-bound work as the bf16 ones do.

  python3 measure_gemm_duty.py --shapes microbench.json --out-regimes R.json --out-microbench M.json \
      [--dtypes bf16,fp8]
"""
import argparse, copy, datetime, json, os, platform, statistics, subprocess, sys, tempfile, time
import torch
import torch.nn.functional as F

REGIME_SHAPES = [  # (name, m tokens, n out, k in)
    ("gpt-1.3b-mb4 qkv", 8192, 6144, 2048),
    ("gpt-1.3b-mb4 fc1", 8192, 8192, 2048),
    ("gpt-1.3b-mb4 fc2", 8192, 2048, 8192),
    ("llama-1.1b-mb4 gate-up", 8192, 11264, 2048),
    ("gpt-2.7b-tp2-mb2 fc1", 4096, 5120, 2560),
]


class Smi:
    def __init__(self):
        # Only the GPU this process times: with CUDA_VISIBLE_DEVICES=N (a physical index), -i N,
        # so that another GPU busy beside it does not mix into the clock and power samples.
        # The samples go to a file, not a pipe: a pipe read only at the end fills (64 KiB, about
        # 20 s of samples at 20 ms) and nvidia-smi then blocks, which lost the samples of every
        # regime after the first 20 s on 2026-11-27.
        first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
        select = ["-i", first] if first.isdigit() else []
        self.f = tempfile.TemporaryFile(mode="w+")
        self.p = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw",
                                   "--format=csv,noheader,nounits", "-lms", "20"] + select,
                                  stdout=self.f, text=True)

    def stop(self):
        time.sleep(0.1)
        self.p.terminate()
        self.p.wait()
        self.f.seek(0)
        out = []
        for line in self.f.read().splitlines():
            parts = [s.strip() for s in line.split(",")]
            try:
                ts = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
                out.append((ts, float(parts[1]), float(parts[2])))
            except (ValueError, IndexError):
                pass
        return out


def window(samples, t0, t1):
    inside = [(c, w) for ts, c, w in samples if t0 <= ts <= t1]
    if not inside:
        return None, None
    return statistics.mean(c for c, _ in inside), statistics.mean(w for _, w in inside)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", required=True)
    p.add_argument("--out-regimes", required=True)
    p.add_argument("--out-microbench", required=True)
    p.add_argument("--settle", type=float, default=1.5)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--dtypes", default="bf16", help="comma-separated: bf16, fp8 (the sweep's shapes to re-time)")
    args = p.parse_args()
    dtypes = set(args.dtypes.split(","))
    if not dtypes <= {"bf16", "fp8"}:
        p.error("--dtypes: expected bf16 and/or fp8, got %s" % args.dtypes)
    dev = torch.device("cuda")
    bf = torch.bfloat16
    if "fp8" in dtypes and torch.cuda.get_device_capability() < (8, 9):
        # As clustersim-microbench: no fp8 tensor cores below compute capability 8.9.
        print("fp8 left out: compute capability %d.%d has no fp8 GEMMs" % torch.cuda.get_device_capability())
        dtypes.discard("fp8")
    smi = Smi()
    src = torch.empty(1 << 28, device=dev, dtype=bf)  # 512 MiB
    dst = torch.empty_like(src)

    def gemm_fn(m, n, k, layout):
        if layout == "fwd":  # out[m,n] = X[m,k] W[n,k]^T
            x, w = torch.randn(m, k, device=dev, dtype=bf), torch.randn(n, k, device=dev, dtype=bf) * 0.02
            return lambda: F.linear(x, w)
        if layout == "dgrad":  # out[m,n] = dY[m,k] W[k,n]
            dy, w = torch.randn(m, k, device=dev, dtype=bf) * 1e-3, torch.randn(k, n, device=dev, dtype=bf) * 0.02
            return lambda: dy @ w
        # wgrad: out[m,n] = dY^T[m,k] X[k,n] with dY stored [k,m]
        dy, x = torch.randn(k, m, device=dev, dtype=bf) * 1e-3, torch.randn(k, n, device=dev, dtype=bf)
        return lambda: dy.t() @ x

    def fp8_fn(m, n, k, fast_accum):
        # out[m,n] = A[m,k] B[k,n], A row-major and B column-major (both K-major: the only fp8
        # layout Hopper's tensor cores take, hence Transformer Engine's transposed fp8 copies),
        # e4m3 inputs, unit fp32 scales, bf16 out: the sweep's cuBLASLt fp8 case.
        a = (torch.rand(m, k, device=dev) * 2 - 1).to(torch.float8_e4m3fn)
        b = (torch.rand(n, k, device=dev) * 2 - 1).to(torch.float8_e4m3fn).t()
        one = torch.ones((), device=dev, dtype=torch.float32)
        return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=bf, use_fast_accum=bool(fast_accum))

    def copy_for(seconds):
        elems = int(min(src.numel(), max(1 << 20, seconds * 3.0e12 / 4)))
        s, d = src[:elems], dst[:elems]
        return lambda: d.copy_(s)

    def one_time(fn):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        return a.elapsed_time(b) * 1e-3

    def sustained(fn, settle):
        t_end = time.time() + settle
        while time.time() < t_end:
            for _ in range(10):
                fn()
            torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(args.reps):
            fn()
        b.record()
        b.synchronize()
        return a.elapsed_time(b) * 1e-3 / args.reps

    def duty(fn, cp, settle):
        t_end = time.time() + settle
        while time.time() < t_end:
            for _ in range(10):
                fn()
                cp()
            torch.cuda.synchronize()
        evs = []
        for _ in range(args.reps):
            cp()
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            fn()
            e1.record()
            evs.append((e0, e1))
        torch.cuda.synchronize()
        return statistics.median(e0.elapsed_time(e1) * 1e-3 for e0, e1 in evs)

    t_start = time.time()
    regimes = []
    cases = []
    for name, m, n, k in REGIME_SHAPES:
        for layout in ("fwd", "dgrad", "wgrad"):
            # training layouts: fwd [m,n,k]; dgrad out[m,k] = dY[m,n] W[n,k]; wgrad out[n,k] = dY^T X
            shape = {"fwd": (m, n, k), "dgrad": (m, k, n), "wgrad": (n, k, m)}[layout]
            if "bf16" in dtypes:
                cases.append(("bf16", name, layout, shape))
            if "fp8" in dtypes:  # every fp8 GEMM is K-major (TN); fwd without fast accumulation
                cases.append(("fp8", name, layout, shape))
    for dtype, name, layout, shape in cases:
        fn = gemm_fn(*shape, layout) if dtype == "bf16" else fp8_fn(*shape, 0)
        fn()
        t = one_time(fn)
        cp = copy_for(t)
        row = {"shape": name, "dtype": dtype, "layout": layout, "m": shape[0], "n": shape[1], "k": shape[2]}
        for regime in ("sustained", "duty", "sustained2"):
            t0 = time.time()
            tt = sustained(fn, args.settle) if regime != "duty" else duty(fn, cp, args.settle)
            t1 = time.time()
            row[regime + "_time_s"] = tt
            row[regime + "_tflops"] = 2.0 * shape[0] * shape[1] * shape[2] / tt / 1e12
            row[regime + "_window"] = (t1 - 0.6, t1)
        regimes.append(row)
        print("%-24s %-4s %-5s sustained %4.0f  duty %4.0f  sustained again %4.0f TFLOP/s" % (
            name, dtype, layout, row["sustained_tflops"], row["duty_tflops"], row["sustained2_tflops"]), flush=True)
    t_regimes = time.time() - t_start

    # Every shape of the sweep in --dtypes, duty regime (held across shapes).
    mb = json.load(open(args.shapes))
    out = copy.deepcopy(mb)
    results = []
    t1_start = time.time()
    for r in mb["gemm"]["results"]:
        dt, batch = r.get("dtype"), r.get("batch", 1)
        if dt not in dtypes or r.get("skipped") or (dt == "fp8" and batch != 1):
            results.append(r)  # not re-timed: the sweep's time stays
            continue
        m, n, k = r["m"], r["n"], r["k"]
        if dt == "fp8":
            fn = fp8_fn(m, n, k, r.get("fast_accum", 0))
        elif batch != 1:
            x = torch.randn(batch, m, k, device=dev, dtype=bf)
            w = torch.randn(batch, k, n, device=dev, dtype=bf)
            fn = lambda: torch.bmm(x, w)
        else:
            fn = gemm_fn(m, n, k, r.get("layout", "fwd"))
        fn()
        t = one_time(fn)
        cp = copy_for(t)
        tt = duty(fn, cp, 0.15)
        nr = dict(r)
        nr.update({"time_s": tt, "tflops": 2.0 * r["m"] * r["n"] * r["k"] * r.get("batch", 1) / tt / 1e12,
                   "samples": args.reps, "inner": 1, "timing": "torch, duty cycle (each GEMM after a copy of its length)",
                   "sweep_time_s": r["time_s"]})
        results.append(nr)
        del fn
    t_sweep = time.time() - t1_start
    samples = smi.stop()
    for row in regimes:
        for regime in ("sustained", "duty", "sustained2"):
            c, w = window(samples, *row.pop(regime + "_window"))
            row[regime + "_sm_clock_mhz"], row[regime + "_power_w"] = c, w
    props = torch.cuda.get_device_properties(0)
    env = {"gpu": props.name, "torch": torch.__version__, "cuda": torch.version.cuda, "python": platform.python_version(),
           "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "command_line": " ".join(sys.argv)}
    json.dump({"format": "clustersim-gemm-duty/1", "source": "calibration/training/measure_gemm_duty.py",
               "environment": env, "settle_s": args.settle, "reps": args.reps, "wall_regimes_s": t_regimes,
               "results": regimes}, open(args.out_regimes, "w"), indent=1)
    out["gemm"]["results"] = results
    # A file re-timed before (bf16 on 2026-11-26) keeps that re-timing's provenance: one entry
    # per re-timing, each with the dtypes it re-timed (the first, without the field, was bf16).
    prev = mb["provenance"].get("duty_cycle_retiming", [])
    prev = [dict(prev, dtypes=prev.get("dtypes", ["bf16"]))] if isinstance(prev, dict) else list(prev)
    retimings = prev + [dict(env, wall_s=t_sweep, source_file=args.shapes, dtypes=sorted(dtypes))]
    named = " and ".join(d for d in ("bf16", "fp8") if any(d in e["dtypes"] for e in retimings))
    out["gemm"]["library"] = ("torch (cuBLAS/cuBLASLt as eager PyTorch calls it; fp8 through torch._scaled_mm) for %s; "
                              "the sweep's cuBLASLt otherwise" % named)
    out["gemm"]["timing_method"] = ("%s: torch, each GEMM preceded by a memory-bound copy of about its length (a "
                                    "training step's duty cycle), CUDA events around each GEMM, median of %d; other "
                                    "dtypes as the sweep" % (named, args.reps))
    out["provenance"]["duty_cycle_retiming"] = retimings
    json.dump(out, open(args.out_microbench, "w"), indent=1)
    ratios = [r["sweep_time_s"] / r["time_s"] for r in results if "sweep_time_s" in r]
    for d in sorted(dtypes):
        rs = [r["sweep_time_s"] / r["time_s"] for r in results if "sweep_time_s" in r and r["dtype"] == d
              and r["flop"] >= 1e11]
        print("%s shapes of at least 1e11 FLOP re-timed: %d, median sweep/duty time ratio %s" % (
            d, len(rs), "%.3f" % statistics.median(rs) if rs else "-"))
    print("all shapes re-timed: %d, median sweep/duty time ratio %.3f (%.1f s)" % (
        len(ratios), statistics.median(ratios), t_sweep))


if __name__ == "__main__":
    main()

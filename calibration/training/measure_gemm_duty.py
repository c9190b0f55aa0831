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

  python3 measure_gemm_duty.py --shapes microbench.json --out-regimes R.json --out-microbench M.json
"""
import argparse, copy, datetime, json, os, platform, statistics, subprocess, sys, time
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
        first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
        select = ["-i", first] if first.isdigit() else []
        self.p = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw",
                                   "--format=csv,noheader,nounits", "-lms", "20"] + select,
                                  stdout=subprocess.PIPE, text=True)

    def stop(self):
        time.sleep(0.1)
        self.p.terminate()
        out = []
        for line in self.p.stdout.read().splitlines():
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
    args = p.parse_args()
    dev = torch.device("cuda")
    bf = torch.bfloat16
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
    for name, m, n, k in REGIME_SHAPES:
        for layout in ("fwd", "dgrad", "wgrad"):
            # training layouts: fwd [m,n,k]; dgrad out[m,k] = dY[m,n] W[n,k]; wgrad out[n,k] = dY^T X
            shape = {"fwd": (m, n, k), "dgrad": (m, k, n), "wgrad": (n, k, m)}[layout]
            fn = gemm_fn(*shape, layout)
            fn()
            t = one_time(fn)
            cp = copy_for(t)
            row = {"shape": name, "layout": layout, "m": shape[0], "n": shape[1], "k": shape[2]}
            for regime in ("sustained", "duty", "sustained2"):
                t0 = time.time()
                tt = sustained(fn, args.settle) if regime != "duty" else duty(fn, cp, args.settle)
                t1 = time.time()
                row[regime + "_time_s"] = tt
                row[regime + "_tflops"] = 2.0 * shape[0] * shape[1] * shape[2] / tt / 1e12
                row[regime + "_window"] = (t1 - 0.6, t1)
            regimes.append(row)
            print("%-24s %-5s sustained %4.0f  duty %4.0f  sustained again %4.0f TFLOP/s" % (
                name, layout, row["sustained_tflops"], row["duty_tflops"], row["sustained2_tflops"]), flush=True)
    t_regimes = time.time() - t_start

    # Every bf16 shape of the sweep, duty regime (held across shapes).
    mb = json.load(open(args.shapes))
    out = copy.deepcopy(mb)
    results = []
    t1_start = time.time()
    for r in mb["gemm"]["results"]:
        if r.get("dtype") != "bf16" or r.get("skipped") or r.get("batch", 1) != 1:
            if r.get("dtype") == "bf16" and r.get("batch", 1) != 1 and not r.get("skipped"):
                b, m, n, k = r["batch"], r["m"], r["n"], r["k"]
                x = torch.randn(b, m, k, device=dev, dtype=bf)
                w = torch.randn(b, k, n, device=dev, dtype=bf)
                fn = lambda: torch.bmm(x, w)
            else:
                results.append(r)
                continue
        else:
            m, n, k = r["m"], r["n"], r["k"]
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
    out["gemm"]["library"] = "torch (cuBLAS/cuBLASLt as eager PyTorch calls it) for bf16; the sweep's cuBLASLt otherwise"
    out["gemm"]["timing_method"] = ("bf16: torch, each GEMM preceded by a memory-bound copy of about its length (a "
                                    "training step's duty cycle), CUDA events around each GEMM, median of %d; other "
                                    "dtypes as the sweep" % args.reps)
    out["provenance"]["duty_cycle_retiming"] = dict(env, wall_s=t_sweep, source_file=args.shapes)
    json.dump(out, open(args.out_microbench, "w"), indent=1)
    ratios = [r["sweep_time_s"] / r["time_s"] for r in results if "sweep_time_s" in r]
    print("bf16 shapes re-timed: %d, median sweep/duty time ratio %.3f (%.1f s)" % (
        len(ratios), statistics.median(ratios), t_sweep))


if __name__ == "__main__":
    main()

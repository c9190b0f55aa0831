#!/usr/bin/env python3
"""Why eager PyTorch's GEMMs run faster in training than the calibration sweep says.

The training profiles (calibration/README.md, "Kernel profiles of nine runs") show the
nvjet GEMMs of eager PyTorch 10-20% faster than the cost model, whose GEMM curve comes from
clustersim-microbench (cuBLASLt top-1 heuristic, inputs uniform in [-1, 1], samples of
back-to-back calls). This times the training runs' own GEMM shapes through torch (the
library path training uses) under each of the conditions that differ:

  data     uniform: uniform in [-1, 1] (the sweep's inputs)
           train:   weights N(0, 0.02), activations N(0, 1), output gradients N(0, 1e-3)
  mode     b2b:         `reps` calls back to back, one pair of CUDA events (the sweep's way)
           interleaved: each GEMM followed by a memory-bound copy of about the same length
                        (as in a training step), a pair of events around each GEMM

and samples the SM clock and power with nvidia-smi in the background, so that a difference
can be put down to data (power), duty cycle (clock) or the kernel chosen.

  python3 measure_gemm_paths.py --out FILE.json
"""
import argparse, datetime, json, platform, statistics, subprocess, sys, time
import torch
import torch.nn.functional as F

# (name, m tokens, n out features, k in features): the GEMMs of the profiled runs
SHAPES = [
    ("gpt-1.3b-mb4 qkv", 8192, 6144, 2048),
    ("gpt-1.3b-mb4 proj", 8192, 2048, 2048),
    ("gpt-1.3b-mb4 fc1", 8192, 8192, 2048),
    ("gpt-1.3b-mb4 fc2", 8192, 2048, 8192),
    ("gpt-1.3b-mb4 logits", 8192, 50304, 2048),
    ("llama-1.1b-mb4 qkv", 8192, 2560, 2048),
    ("llama-1.1b-mb4 gate-up", 8192, 11264, 2048),
    ("llama-1.1b-mb4 down", 8192, 2048, 5632),
    ("llama-1.1b-mb4 logits", 8192, 32000, 2048),
    ("gpt-2.7b-tp2-mb2 qkv", 4096, 3840, 2560),
    ("gpt-2.7b-tp2-mb2 proj", 4096, 2560, 1280),
    ("gpt-2.7b-tp2-mb2 fc1", 4096, 5120, 2560),
    ("gpt-2.7b-tp2-mb2 fc2", 4096, 2560, 5120),
    ("gpt-2.7b-tp2-mb2 logits", 4096, 25152, 2560),
    ("square 8192", 8192, 8192, 8192),
]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--reps", type=int, default=20)
    args = p.parse_args()
    dev = torch.device("cuda")
    bf = torch.bfloat16
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw", "--format=csv,noheader,nounits",
                            "-lms", "20"], stdout=subprocess.PIPE, text=True)
    t_start = time.time()
    phases = []  # (t0, t1, key)
    results = []
    sink = torch.empty(1 << 27, device=dev, dtype=bf)  # 256 MiB copy source
    sink2 = torch.empty_like(sink)

    def make(kind, shape, scale):
        if kind == "uniform":
            return (torch.rand(shape, device=dev, dtype=torch.float32) * 2 - 1).to(bf)
        return (torch.randn(shape, device=dev, dtype=torch.float32) * scale).to(bf)

    for name, m, n, k in SHAPES:
        for data in ("uniform", "train"):
            x = make(data, (m, k), 1.0)
            w = make(data, (n, k), 0.02)
            dy = make(data, (m, n), 1e-3)
            ops = {"fwd": lambda: F.linear(x, w), "dgrad": lambda: dy @ w, "wgrad": lambda: dy.t() @ x}
            for layout, fn in ops.items():
                for _ in range(3):
                    fn()
                torch.cuda.synchronize()
                # back to back
                t0 = time.time()
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                for _ in range(args.reps):
                    fn()
                b.record()
                b.synchronize()
                t1 = time.time()
                b2b = a.elapsed_time(b) * 1e-3 / args.reps
                phases.append((t0, t1, (name, data, layout, "b2b")))
                # interleaved with a copy of about the GEMM's length (3 TB/s read + write)
                copy_elems = int(min(sink.numel(), max(1 << 20, b2b * 3.0e12 / 4)))
                src, dst = sink[:copy_elems], sink2[:copy_elems]
                evs = []
                t0 = time.time()
                for _ in range(args.reps):
                    dst.copy_(src)
                    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    e0.record()
                    fn()
                    e1.record()
                    evs.append((e0, e1))
                torch.cuda.synchronize()
                t1 = time.time()
                inter = statistics.median(e0.elapsed_time(e1) * 1e-3 for e0, e1 in evs)
                phases.append((t0, t1, (name, data, layout, "interleaved")))
                flop = 2.0 * m * n * k
                results.append({"shape": name, "m": m, "n": n, "k": k, "layout": layout, "data": data,
                                "b2b_time_s": b2b, "interleaved_time_s": inter,
                                "b2b_tflops": flop / b2b / 1e12, "interleaved_tflops": flop / inter / 1e12})
            del x, w, dy
        print(name, "done", flush=True)

    # kernel names of one shape per layout, from the profiler
    kernels = {}
    try:
        from torch.profiler import profile, ProfilerActivity
        for name, m, n, k in SHAPES:
            x, w, dy = make("train", (m, k), 1.0), make("train", (n, k), 0.02), make("train", (m, n), 1e-3)
            for layout, fn in {"fwd": lambda: F.linear(x, w), "dgrad": lambda: dy @ w,
                               "wgrad": lambda: dy.t() @ x}.items():
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    fn()
                    torch.cuda.synchronize()
                kernels[name + " " + layout] = [e.key for e in prof.key_averages() if e.device_type.name == "CUDA"]
    except Exception as e:  # the names are a help, not the measurement
        kernels["error"] = repr(e)

    time.sleep(0.1)
    smi.terminate()
    samples = []
    for line in smi.stdout.read().splitlines():
        parts = [s.strip() for s in line.split(",")]
        try:
            ts = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            samples.append((ts, float(parts[1]), float(parts[2])))
        except (ValueError, IndexError):
            pass
    # nvidia-smi prints local time; shift to time.time() by the first sample
    clock_by_key = {}
    for t0, t1, key in phases:
        inside = [(c, w) for ts, c, w in samples if t0 <= ts <= t1]
        if inside:
            clock_by_key[key] = (statistics.mean(c for c, _ in inside), statistics.mean(w for _, w in inside), len(inside))
    for r in results:
        for mode in ("b2b", "interleaved"):
            v = clock_by_key.get((r["shape"], r["data"], r["layout"], mode))
            if v:
                r[mode + "_sm_clock_mhz"], r[mode + "_power_w"], r[mode + "_clock_samples"] = v
    props = torch.cuda.get_device_properties(0)
    doc = {"format": "clustersim-gemm-paths/1", "source": "calibration/training/measure_gemm_paths.py",
           "conditions": __doc__.split("\n\n")[1],
           "environment": {"gpu": props.name, "torch": torch.__version__, "cuda": torch.version.cuda,
                           "cublas": torch.backends.cuda.preferred_blas_library().name if hasattr(torch.backends.cuda, "preferred_blas_library") else None,
                           "python": platform.python_version(),
                           "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                           "command_line": " ".join(sys.argv), "wall_s": time.time() - t_start},
           "clock_samples": len(samples), "results": results, "kernels": kernels}
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    for r in results:
        print("%-26s %-5s %-7s b2b %5.0f TFLOP/s (%s MHz, %s W)  interleaved %5.0f (%s MHz)" % (
            r["shape"], r["layout"], r["data"], r["b2b_tflops"], r.get("b2b_sm_clock_mhz", "?"),
            r.get("b2b_power_w", "?"), r["interleaved_tflops"], r.get("interleaved_sm_clock_mhz", "?")))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Kernel-level breakdown of training steps, and fused-attention timings.

Two measurements that calibrate what the microbenchmarks do not cover:
  1. torch.profiler over a few steps of measure_train.py's models: GPU time per kernel
     (grouped by name), so the cost model's op list can be checked against what eager
     PyTorch with autocast really launches;
  2. scaled_dot_product_attention (flash backend, causal, bf16) forward and backward
     time over shapes, timed with CUDA events (median of repeats after warm-up).

  python3 profile_step.py --out DIR
writes DIR/profile_steps.json and DIR/sdpa_flash.json and prints a compact summary.
"""
import argparse, json, os, sys, time, datetime
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure_train as mt  # noqa: E402

CONFIGS = [
    # name, family, hidden, layers, heads, kv_heads, ffn, seq, vocab, micro_batch
    ("gpt-1.3b-s2048-mb4", "gpt", 2048, 24, 16, 16, 8192, 2048, 50304, 4),
    ("llama-420m-s2048-mb8", "llama", 1024, 32, 16, 4, 2816, 2048, 32000, 8),
]


def profile_config(cfg, steps=4, warmup=3):
    name, fam, h, l, a, kv, f, s, v, b = cfg
    dev = torch.device("cuda")
    with torch.device(dev):
        model = mt.GPT(v, s, h, l, a, f) if fam == "gpt" else mt.Llama(v, s, h, l, a, kv, f)
    mt.init_weights(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    idx = torch.randint(0, v, (warmup + steps, b, s), device=dev)
    tgt = torch.randint(0, v, (warmup + steps, b, s), device=dev)

    def step(i):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(idx[i])
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), tgt[i].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for i in range(warmup):
        step(i)
    torch.cuda.synchronize()
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for i in range(warmup, warmup + steps):
            step(i)
        torch.cuda.synchronize()
    kernels = {}
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CUDA:
            continue
        k = kernels.setdefault(e.name, [0.0, 0])
        k[0] += e.device_time / 1e6 / steps  # seconds per step (device_time is in us)
        k[1] += 1
    rows = sorted(([n, t, c // steps] for n, (t, c) in kernels.items()), key=lambda r: -r[1])
    total = sum(r[1] for r in rows)
    del model, opt
    torch.cuda.empty_cache()
    return {"name": name, "kernel_time_per_step_s": total, "kernels": [
        {"name": n, "time_per_step_s": t, "launches_per_step": c} for n, t, c in rows]}


def time_cuda(fn, reps=20, warm=3):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); torch.cuda.synchronize()
        ts.append(s.elapsed_time(e) / 1e3)
    ts.sort()
    return ts[len(ts) // 2]


def sdpa_shapes():
    """The sweep's (batch, heads, seq, head_dim): head dims 64 and 128, sequences 512-8192,
    8-32 heads, batch 16384 / seq (measure_sdpa_backends.py times the same shapes)."""
    return [(max(1, 16384 // s), heads, s, d) for d in (64, 128) for s in (512, 1024, 2048, 4096, 8192)
            for heads in (8, 16, 32)]


def sdpa_sweep():
    from torch.nn.attention import SDPBackend, sdpa_kernel
    out = []
    for (b, hh, s, d) in sdpa_shapes():
        q = torch.randn(b, hh, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        k = torch.randn_like(q, requires_grad=True)
        v = torch.randn_like(q, requires_grad=True)
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            fwd = time_cuda(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            g = torch.randn_like(o)
            both = time_cuda(lambda: torch.autograd.grad(
                F.scaled_dot_product_attention(q, k, v, is_causal=True), (q, k, v), g))
        flops_fwd = 4.0 * b * hh * s * s * d / 2  # causal: half the score matrix
        out.append({"batch": b, "heads": hh, "seq": s, "head_dim": d, "forward_s": fwd,
                    "backward_s": both - fwd, "forward_tflops_causal": flops_fwd / fwd / 1e12,
                    "backward_tflops_causal": 2.5 * flops_fwd / max(both - fwd, 1e-9) / 1e12})
        del q, k, v
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    prov = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
            "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "script": "calibration/training/profile_step.py"}
    t0 = time.time()
    sd = sdpa_sweep()
    json.dump({"format": "clustersim-sdpa-flash/1", "provenance": prov, "results": sd},
              open(os.path.join(args.out, "sdpa_flash.json"), "w"), indent=1)
    print("sdpa flash (bf16, causal): b h s d -> fwd TFLOP/s, bwd TFLOP/s (causal-effective FLOPs, bwd = 2.5x fwd)")
    for r in sd:
        print("  %3d %3d %5d %4d  fwd %7.1f  bwd %7.1f" % (r["batch"], r["heads"], r["seq"], r["head_dim"],
                                                         r["forward_tflops_causal"], r["backward_tflops_causal"]))
    profiles = [profile_config(c) for c in CONFIGS]
    json.dump({"format": "clustersim-kernel-profile/1", "provenance": prov, "configs": profiles},
              open(os.path.join(args.out, "profile_steps.json"), "w"), indent=1)
    for p in profiles:
        print("== %s: %.2f ms of kernels per step" % (p["name"], p["kernel_time_per_step_s"] * 1e3))
        for k in p["kernels"][:28]:
            print("  %8.3f ms %5d  %s" % (k["time_per_step_s"] * 1e3, k["launches_per_step"], k["name"][:110]))
    print("done in %.0f s" % (time.time() - t0))


if __name__ == "__main__":
    main()

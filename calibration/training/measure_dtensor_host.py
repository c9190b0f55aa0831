#!/usr/bin/env python3
"""Host dispatch of DTensor tensor parallelism (measure_parallel.py's blocks), for clustersim.

On 2+ ranks under autocast bf16 with tiny shapes (the GPU never limits): the DTensor GPT and
Llama blocks as parallelize_dtensor parallelizes them, against the same plain blocks, and one
Linear plain / ColwiseParallel / RowwiseParallel with and without bias; forward,
forward+backward, and (blocks) zero_grad(set_to_none=True) then forward+backward as a step does. measure_host.py's timing (host_per_call_s) and profile (after every case is timed), plus kernels per call
by class (NCCL by dtype, memcpy). torchrun --nproc-per-node 2 measure_dtensor_host.py --out F
"""
import copy, json, os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure_host as mh  # noqa: E402
import torch, torch.distributed as dist, torch.nn as nn  # noqa: E402
from torch.distributed.tensor.parallel import ColwiseParallel as C, RowwiseParallel as R, parallelize_module  # noqa
import measure_parallel as mp  # noqa: E402
mt = mh.mt


def census(fn, calls):
    from torch.profiler import ProfilerActivity as A, profile
    with profile(activities=[A.CPU, A.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    out = {}
    for e in prof.key_averages():
        if "cuda" not in str(getattr(e, "device_type", "")).lower():
            continue
        n = e.key.lower()
        k = ("nccl_" + ("f32" if "_f32" in n else "bf16" if "_bf16" in n else "other")) if "nccl" in n else \
            n.split()[0] if n.startswith(("memcpy", "memset")) else \
            "gemm" if any(g in n for g in ("gemm", "nvjet", "cutlass", "xmma")) else "other"
        out[k] = out.get(k, 0) + e.count / calls
    return out


def main():
    import argparse
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    args = p.parse_args()
    args.target_s, args.reps, args.profile_calls = 0.04, 3, 30
    dev, world, mesh = mh.init_torchrun(args)
    H = 256
    mt.ATTN = mt.AttentionConfig("auto", "native")
    torch.manual_seed(0)
    with torch.device(dev):
        blocks = {"gpt": mp.DTGPTBlock(H, 4, 4 * H), "llama": mp.DTLlamaBlock(H, 4, 2, 768)}
        cos, sin = mt.rope_tables(64, H // 4)
    plans = {"gpt": dict(q=C(), k=C(), v=C(), proj=R(), fc1=C(), fc2=R()),
             "llama": dict(wq=C(), wk=C(), wv=C(), wo=R(), w1=C(), w3=C(), w2=R())}
    x = torch.randn(2, 32, H, device=dev)
    xg = x.clone().requires_grad_(True)
    res = []

    def record(name, fn, **meta):
        # The census runs in measure_host's profiling pass, after every case is timed.
        mh.case(res, name, fn, args, ctx=mh.autocast_ctx, collective=True,
                extra=("kernel_census_per_call", lambda f: census(f, args.profile_calls)), **meta)

    for fam, blk in blocks.items():
        tp = copy.deepcopy(blk)
        parallelize_module(tp, mesh, plans[fam])
        mods = {"colwise": sum(isinstance(v, C) for v in plans[fam].values()),
                "rowwise": sum(isinstance(v, R) for v in plans[fam].values()), "bias": fam == "gpt"}
        for label, m in (("plain", blk), ("dtensor-tp", tp)):
            run = m if fam == "gpt" else (lambda i, m=m: m(i, cos[:32], sin[:32]))

            def fwd(run=run):
                with torch.no_grad():
                    return run(x)

            def fwd_bwd(run=run):
                run(xg).float().sum().backward()

            # As a training step: gradients set to None first, so that the backward's first
            # accumulation into each parameter creates its .grad (DTensor: a new DTensor).
            def zero_fwd_bwd(run=run, m=m):
                m.zero_grad(set_to_none=True)
                run(xg).float().sum().backward()
            for part, fn in (("forward", fwd), ("forward+backward", fwd_bwd),
                             ("zero_grad+forward+backward", zero_fwd_bwd)):
                record("dtblock %s %s %s" % (fam, label, part), fn, block=fam, model=label, part=part,
                       shapes="x [2, 32, %d], tp %d" % (H, world), parallel_modules=mods)
    for bias in (True, False):
        lin = nn.Linear(H, H, bias=bias).to(dev)
        col, row = copy.deepcopy(lin), copy.deepcopy(lin)
        parallelize_module(col, mesh, C())
        parallelize_module(row, mesh, R())
        xr = torch.randn(2, 32, H // world, device=dev, requires_grad=True)
        for label, m, inp in (("plain", lin, xg), ("colwise", col, xg), ("rowwise", row, xr)):
            record("dtlinear %s bias=%d forward+backward" % (label, bias),
                   lambda m=m, inp=inp: m(inp).float().sum().backward(), model=label, bias=bias,
                   part="forward+backward")
    mh.profile_pending(args)
    if args.rank == 0:
        env = {"gpu": torch.cuda.get_device_name(dev), "torch": torch.__version__, "world_size": world,
               "nccl_nvls_enable": os.environ.get("NCCL_NVLS_ENABLE"), "command_line": " ".join(sys.argv)}
        with open(args.out, "w") as f:
            json.dump({"format": "clustersim-host-dispatch/1", "source": "calibration/training/measure_dtensor_host.py",
                       "environment": env, "dtblocks": res}, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

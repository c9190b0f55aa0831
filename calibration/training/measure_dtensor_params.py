#!/usr/bin/env python3
"""Host cost of DTensor tensor parallelism per module, per bias and per optimizer parameter.

measure_dtensor_host.py timed whole DTensor blocks; their collectives tie both ranks' host
loops together, so one rank's jitter lands in the other's figure and two runs differed by
up to 2x. This benchmark separates what a DTensor module costs on the host from anything
that communicates: stacks of K independent ColwiseParallel Linears applied to one input
that needs no gradient (so neither forward nor backward communicates), with and without
bias, against the same plain Linears, under autocast bf16 as measure_parallel.py's steps run
(zero_grad(set_to_none=True), forward, backward), and the fused AdamW step of
measure_parallel.py over their parameters. K = 8 and 32: the slope over K is per module,
free of the fixed per-call cost (RowwiseParallel: K = 8 only). Every rank times its own loops (no barrier inside them),
7 repetitions, medians; all ranks' figures are kept. RowwiseParallel stacks (a forward
all-reduce each) are timed too, with the ranks' loops aligned, as a cross-check. The plain
GPT and Llama blocks of measure_host.py give this machine's eager host rate per kernel, so
the figures can be carried to the rate of the profile's host-dispatch file.

  torchrun --standalone --nproc-per-node 2 measure_dtensor_params.py --out F [--optimizer-only | --loss-only]
"""
import copy, json, os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure_host as mh  # noqa: E402
import torch, torch.distributed as dist, torch.nn as nn  # noqa: E402
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module  # noqa: E402

mt = mh.mt
H = 256


def gather_cases(local):
    """Every rank's records of the same cases, side by side."""
    allr = [None] * dist.get_world_size()
    dist.all_gather_object(allr, local)
    out = []
    for i, rec in enumerate(local):
        merged = dict(rec)
        for key in ("host_per_call_s", "host_per_call_min_s", "wall_per_call_s", "kernels_per_call"):
            if key in rec:
                merged[key + "_per_rank"] = [r[i].get(key) for r in allr]
        out.append(merged)
    return out


def loss_cases(args, dev, mesh, world, tokens=64, vocab=1024):
    """The loss of measure_parallel.py's DTensor runs (--dtp-loss parallel): logits sharded over the
    vocabulary (the head's ColwiseParallel output, Shard(-1)), flattened, cast to fp32 and
    cross_entropy under loss_parallel, forward and backward inside it, under autocast, against the
    same ops on a plain tensor of a rank's shard. The ranks' loops run aligned (the DTensor loss
    all-reduces inside)."""
    import contextlib
    import torch.nn.functional as F
    try:
        from torch.distributed.tensor import Shard, distribute_tensor
    except ImportError:
        from torch.distributed._tensor import Shard, distribute_tensor
    from torch.distributed.tensor.parallel import loss_parallel
    res = []
    torch.manual_seed(0)
    full = torch.randn(1, tokens, vocab, device=dev, dtype=torch.bfloat16)
    target = torch.randint(0, vocab, (1, tokens), device=dev)
    plain_target = torch.randint(0, vocab // world, (1, tokens), device=dev)
    for label, x, tgt, ctx in (("plain", full[..., :vocab // world].contiguous(), plain_target, contextlib.nullcontext),
                               ("dtensor", distribute_tensor(full, mesh, [Shard(-1)]), target, loss_parallel)):
        x = x.detach().requires_grad_(True)

        def fwd(x=x, tgt=tgt, ctx=ctx):
            with ctx():
                return F.cross_entropy(x.flatten(0, 1).float(), tgt.flatten(0, 1))

        def fwd_bwd(x=x, tgt=tgt, ctx=ctx):
            with ctx():
                F.cross_entropy(x.flatten(0, 1).float(), tgt.flatten(0, 1)).backward()
        meta = dict(section="loss", model=label, shapes="logits [1, %d, %d], tp %d" % (tokens, vocab, world))
        mh.case(res, "loss %s forward" % label, fwd, args, ctx=mh.autocast_ctx, collective=True, part="forward", **meta)
        mh.case(res, "loss %s forward+backward" % label, fwd_bwd, args, ctx=mh.autocast_ctx, collective=True,
                part="forward+backward", **meta)
        dist.barrier()
    return res


def main():
    import argparse
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--loss-only", action="store_true",
                   help="time only the blocks and the vocabulary-parallel cross-entropy (loss_parallel) against "
                        "the plain one on a rank's shard of the logits")
    p.add_argument("--optimizer-only", action="store_true",
                   help="time only the blocks and the fused AdamW steps (ColwiseParallel stacks), not the "
                        "module passes or the RowwiseParallel stacks")
    args = p.parse_args()
    args.target_s, args.profile_calls = 0.05, 20
    dev, world, mesh = mh.init_torchrun(args)
    mt.ATTN = mt.AttentionConfig("auto", "native")
    res = []

    # This machine's eager rate: measure_host.py's plain blocks (each rank alone).
    # In place: the records are the ones measure_host's profiling pass fills in later.
    blocks = mh.block_cases(args, dev)
    for r in blocks:
        r["section"] = "blocks"
    res += blocks

    if args.loss_only:
        res += loss_cases(args, dev, mesh, world)
    x = torch.randn(2, 32, H, device=dev)            # needs no gradient: no input-gradient all-reduce
    xr = torch.randn(2, 32, H // world, device=dev)  # RowwiseParallel's local input shard
    for kind in (() if args.loss_only else ("colwise",) if args.optimizer_only else ("colwise", "rowwise")):
        for K in ((8, 32) if kind == "colwise" else (8,)):
            for bias in (False, True):
                torch.manual_seed(0)
                plain = nn.ModuleList([nn.Linear(H, H, bias=bias) for _ in range(K)]).to(dev)
                dt = copy.deepcopy(plain)
                for lin in dt:
                    parallelize_module(lin, mesh, ColwiseParallel() if kind == "colwise" else RowwiseParallel())
                for label, m in (("plain", plain), ("dtensor", dt)):
                    if kind == "rowwise" and label == "plain":
                        inp = torch.randn(2, 32, H, device=dev)
                    else:
                        inp = x if kind == "colwise" else xr

                    def fwd(m=m, inp=inp):
                        return sum(lin(inp).float().sum() for lin in m)

                    def step(m=m, fwd=fwd):
                        m.zero_grad(set_to_none=True)
                        fwd().backward()
                    groups = [prm for prm in m.parameters()]
                    opt = torch.optim.AdamW(groups, lr=1e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1,
                                            fused=True)
                    with mh.autocast_ctx():
                        step()
                    meta = dict(section="stack", kind=kind, model=label, modules=K, bias=bias,
                                param_tensors=len(groups), shapes="x [2, 32, %d], Linear(%d, %d), tp %d" % (H, H, H, world))
                    comm = kind == "rowwise" and label == "dtensor"
                    if not args.optimizer_only:
                        mh.case(res, "%s %s K=%d bias=%d forward" % (kind, label, K, bias), fwd, args,
                                ctx=mh.autocast_ctx, collective=comm, part="forward", **meta)
                        mh.case(res, "%s %s K=%d bias=%d zero_grad+forward+backward" % (kind, label, K, bias), step,
                                args, ctx=mh.autocast_ctx, collective=comm, part="zero_grad+forward+backward", **meta)
                    if kind == "colwise":
                        with mh.autocast_ctx():
                            step()  # gradients for the optimizer
                        mh.case(res, "%s %s K=%d bias=%d adamw-fused step" % (kind, label, K, bias), opt.step, args,
                                part="optimizer", **meta)
                    dist.barrier()
    mh.profile_pending(args)  # after every case is timed
    res = gather_cases(res)
    if args.rank == 0:
        env = {"gpu": torch.cuda.get_device_name(dev), "torch": torch.__version__, "world_size": world,
               "cpu_count": os.cpu_count(), "nccl_nvls_enable": os.environ.get("NCCL_NVLS_ENABLE"),
               "command_line": " ".join(sys.argv), "reps": args.reps, "target_s": args.target_s}
        with open(args.out, "w") as f:
            json.dump({"format": "clustersim-host-dispatch/1", "source": "calibration/training/measure_dtensor_params.py",
                       "units": "seconds per call; *_per_rank: every rank's own figure (rank 0 first)",
                       "environment": env, "cases": res}, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

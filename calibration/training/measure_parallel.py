#!/usr/bin/env python3
"""Measured multi-GPU training run (one host) for clustersim calibration.

Modes, launched with torchrun (one process a GPU); ranks are laid out tensor-parallel
fastest, then data-parallel, then pipeline stage (rank = stage*dp*tp + dp_rank*tp + tp_rank):
  --mode ddp   data parallelism: measure_train.py's GPT or Llama in
               torch.nn.parallel.DistributedDataParallel; plan dp=N.
  --mode fsdp  FullyShardedDataParallel (FSDP1; --fsdp-impl fsdp2 for fully_shard) of the same
               models, one unit per transformer block plus the root; plan dp=N, zero 3 (full
               shard) or 2 (--fsdp-sharding grad_op); --fsdp-mp none|bf16 and the other knobs below.
  --mode tp    Megatron-style hand-written tensor parallelism of a GPT transformer: column-parallel
               QKV and fc1, row-parallel proj and fc2 (one all-reduce after each in forward, one
               before each column-parallel layer in backward), a vocabulary-parallel logits layer
               and cross-entropy, replicated embeddings. --tp T (default: all ranks); with
               T < N the rest is data parallel (DDP over the data-parallel group): plan dp=N/T, tp=T.
  --mode dtp   PyTorch DTensor tensor parallelism (torch.distributed.tensor.parallel.parallelize_module
               with ColwiseParallel q/k/v (separate projections), fc1 (GPT) or gate/up (Llama),
               RowwiseParallel proj/fc2/down, a ColwiseParallel vocabulary-sharded head with
               loss_parallel); GPT and Llama; plan tp=N.
  --mode pp    a pipeline of --pp stages (default: N / tp) with the 1F1B schedule, --micro-batches M
               per step, activations and gradients sent with torch.distributed batch_isend_irecv
               (Megatron's combined send-forward/recv-backward calls); with --tp 2 each stage is
               Megatron-style tensor parallel (GPT only). Untied logits. plan pp=P, tp=T.

  torchrun --standalone --nproc-per-node 4 calibration/training/measure_parallel.py --mode fsdp \
      --fsdp-mp bf16 --family llama --hidden 4096 --layers 32 --heads 32 --seq-len 2048 \
      --micro-batch 1 --out fsdp.json

It writes one "clustersim-measured-run/1" document (rank 0) with the model, training (with the
framework and its knobs) and plan, and the same measured fields as measure_train.py. Every rank
times its steps with CUDA events (no host synchronisation inside the measured loop); a step's
time is the slowest rank's, and the reported figures are medians over the measured steps.
Models are built directly on the GPU. On any failure (OOM included) the failing rank still
writes a document with an "error" object (rank 0 to --out, others to OUT.rankR).
NVLink multicast stays off (NCCL_NVLS_ENABLE=0): on shared hosts it can take GPUs out of service.
"""

import argparse
import math
import os
import sys
import time
import traceback

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure_train as mt  # noqa: E402

SOURCE = "calibration/training/measure_parallel.py"

TP_GROUP = None  # the tensor-parallel process group of this rank (Megatron-style code)


# ---------------------------------------------------------------------------
# Megatron-style tensor parallelism (Megatron-LM's f and g operators)
# ---------------------------------------------------------------------------
class _CopyToTP(torch.autograd.Function):
    """f: identity forward; all-reduce of the gradient backward (input of a column-parallel layer)."""

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        g = g.contiguous()
        dist.all_reduce(g, group=TP_GROUP)
        return g


class _ReduceFromTP(torch.autograd.Function):
    """g: all-reduce forward; identity backward (output of a row-parallel layer). The output
    is replicated, so every rank already holds the whole gradient."""

    @staticmethod
    def forward(ctx, x):
        x = x.contiguous()
        dist.all_reduce(x, group=TP_GROUP)
        return x

    @staticmethod
    def backward(ctx, g):
        return g


class TPBlock(nn.Module):
    def __init__(self, hidden, heads, ffn_hidden, tp):
        super().__init__()
        self.local_heads = heads // tp
        self.head_dim = hidden // heads
        local = self.local_heads * self.head_dim
        self.ln1 = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * local, bias=True)       # column-parallel
        self.proj = nn.Linear(local, hidden, bias=False)         # row-parallel
        self.proj_bias = nn.Parameter(torch.zeros(hidden))       # added once, after the reduction
        self.ln2 = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, ffn_hidden // tp, bias=True)  # column-parallel
        self.fc2 = nn.Linear(ffn_hidden // tp, hidden, bias=False)  # row-parallel
        self.fc2_bias = nn.Parameter(torch.zeros(hidden))

    def forward(self, x):
        b, t, _ = x.shape
        h = _CopyToTP.apply(self.ln1(x))
        q, k, v = self.qkv(h).split(self.local_heads * self.head_dim, dim=2)
        q = q.view(b, t, self.local_heads, self.head_dim).transpose(1, 2)
        k = k.view(b, t, self.local_heads, self.head_dim).transpose(1, 2)
        v = v.view(b, t, self.local_heads, self.head_dim).transpose(1, 2)
        y = mt.sdpa(q, k, v).transpose(1, 2).reshape(b, t, -1)
        x = x + _ReduceFromTP.apply(self.proj(y)) + self.proj_bias
        h = _CopyToTP.apply(self.ln2(x))
        x = x + _ReduceFromTP.apply(self.fc2(F.gelu(self.fc1(h), approximate="tanh"))) + self.fc2_bias
        return x


TP_SHARDED = (".qkv.", ".proj.", ".fc1.", ".fc2.", "head.")  # names of split parameters (Megatron-style)


class StageModel(nn.Module):
    """n_layers transformer blocks of a GPT or Llama model, with the embedding if `first` and
    the final norm, the untied logits layer and the loss if `last`. With tp > 1 (GPT only) the
    blocks are Megatron-style tensor parallel and the logits layer is split by vocabulary, with
    a vocabulary-parallel cross-entropy. One stage that is first and last is the whole model."""

    def __init__(self, args, n_layers, first, last, tp, tp_rank):
        super().__init__()
        self.family, self.first, self.last, self.tp, self.tp_rank = args.family, first, last, tp, tp_rank
        h = args.hidden
        if tp > 1 and args.family != "gpt":
            raise ValueError("Megatron-style tensor parallelism is written for the gpt family only")
        if first:
            if args.family == "gpt":
                self.wte = nn.Embedding(args.vocab, h)
                self.wpe = nn.Embedding(args.seq_len, h)
            else:
                self.tok = nn.Embedding(args.vocab, h)
        if args.family == "gpt":
            self.blocks = nn.ModuleList([TPBlock(h, args.heads, args.ffn_hidden, tp) if tp > 1
                                         else mt.GPTBlock(h, args.heads, args.ffn_hidden) for _ in range(n_layers)])
        else:
            self.blocks = nn.ModuleList([mt.LlamaBlock(h, args.heads, args.kv_heads, args.ffn_hidden)
                                         for _ in range(n_layers)])
            cos, sin = mt.rope_tables(args.seq_len, h // args.heads)
            self.register_buffer("rope_cos", cos, persistent=False)
            self.register_buffer("rope_sin", sin, persistent=False)
        if last:
            self.norm = nn.LayerNorm(h) if args.family == "gpt" else mt.make_rmsnorm(h)
            self.local_vocab = args.vocab // tp
            self.head = nn.Linear(h, self.local_vocab, bias=False)

    def forward(self, x):
        if self.first:
            idx = x
            if self.family == "gpt":
                x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
            else:
                x = self.tok(idx)
        t = x.shape[1]
        for blk in self.blocks:
            x = blk(x) if self.family == "gpt" else blk(x, self.rope_cos[:t], self.rope_sin[:t])
        if not self.last:
            return x
        h = self.norm(x)
        if self.tp > 1:
            h = _CopyToTP.apply(h)
        return self.head(h)

    def loss(self, logits, tgt):
        if self.tp == 1:
            return F.cross_entropy(logits.view(-1, logits.size(-1)), tgt.reshape(-1))
        # Cross-entropy over logits split by vocabulary, without gathering them.
        z = logits.float().view(-1, self.local_vocab)
        t = tgt.reshape(-1)
        m = z.detach().max(dim=-1).values
        dist.all_reduce(m, op=dist.ReduceOp.MAX, group=TP_GROUP)
        z = z - m.unsqueeze(1)
        sum_exp = _ReduceFromTP.apply(z.exp().sum(dim=-1))
        lo = self.tp_rank * self.local_vocab
        inside = (t >= lo) & (t < lo + self.local_vocab)
        local_t = torch.where(inside, t - lo, torch.zeros_like(t))
        picked = z.gather(1, local_t.unsqueeze(1)).squeeze(1) * inside
        picked = _ReduceFromTP.apply(picked)
        return (torch.log(sum_exp) - picked).mean()

    def matmul_weight_params(self):
        """This rank's matmul weights (shards count as stored)."""
        return sum(m.weight.numel() for m in self.modules() if isinstance(m, nn.Linear))


# ---------------------------------------------------------------------------
# DTensor tensor parallelism: blocks with separate q/k/v (and gate/up) projections, so that
# a column-parallel projection's local output holds whole heads (view(b, t, -1, head_dim)).
# ---------------------------------------------------------------------------
class DTGPTBlock(nn.Module):
    def __init__(self, hidden, heads, ffn_hidden, bias=True):
        super().__init__()
        self.head_dim = hidden // heads
        self.ln1 = nn.LayerNorm(hidden)
        self.q = nn.Linear(hidden, hidden, bias=bias)
        self.k = nn.Linear(hidden, hidden, bias=bias)
        self.v = nn.Linear(hidden, hidden, bias=bias)
        self.proj = nn.Linear(hidden, hidden, bias=bias)
        self.ln2 = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, ffn_hidden, bias=bias)
        self.fc2 = nn.Linear(ffn_hidden, hidden, bias=bias)

    def forward(self, x):
        b, t, _ = x.shape
        h = self.ln1(x)
        q = self.q(h).view(b, t, -1, self.head_dim).transpose(1, 2)
        k = self.k(h).view(b, t, -1, self.head_dim).transpose(1, 2)
        v = self.v(h).view(b, t, -1, self.head_dim).transpose(1, 2)
        y = mt.sdpa(q, k, v).transpose(1, 2).reshape(b, t, -1)
        x = x + self.proj(y)
        x = x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))
        return x


class DTLlamaBlock(nn.Module):
    def __init__(self, hidden, heads, kv_heads, ffn_hidden):
        super().__init__()
        self.head_dim = hd = hidden // heads
        self.norm1 = mt.make_rmsnorm(hidden)
        self.wq = nn.Linear(hidden, heads * hd, bias=False)
        self.wk = nn.Linear(hidden, kv_heads * hd, bias=False)
        self.wv = nn.Linear(hidden, kv_heads * hd, bias=False)
        self.wo = nn.Linear(heads * hd, hidden, bias=False)
        self.norm2 = mt.make_rmsnorm(hidden)
        self.w1 = nn.Linear(hidden, ffn_hidden, bias=False)  # gate
        self.w3 = nn.Linear(hidden, ffn_hidden, bias=False)  # up
        self.w2 = nn.Linear(ffn_hidden, hidden, bias=False)  # down

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        h = self.norm1(x)
        q = mt.apply_rope(self.wq(h).view(b, t, -1, self.head_dim).transpose(1, 2), cos, sin)
        k = mt.apply_rope(self.wk(h).view(b, t, -1, self.head_dim).transpose(1, 2), cos, sin)
        v = self.wv(h).view(b, t, -1, self.head_dim).transpose(1, 2)
        y = mt.sdpa(q, k, v).transpose(1, 2).reshape(b, t, -1)
        x = x + self.wo(y)
        h = self.norm2(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class DTModel(nn.Module):
    """GPT (untied logits) or Llama for DTensor tensor parallelism."""

    def __init__(self, args):
        super().__init__()
        self.family = args.family
        h = args.hidden
        if args.family == "gpt":
            self.wte = nn.Embedding(args.vocab, h)
            self.wpe = nn.Embedding(args.seq_len, h)
            self.blocks = nn.ModuleList([DTGPTBlock(h, args.heads, args.ffn_hidden, bias=args.dtp_gpt_bias == "on")
                                         for _ in range(args.layers)])
            self.norm = nn.LayerNorm(h)
        else:
            self.tok = nn.Embedding(args.vocab, h)
            self.blocks = nn.ModuleList([DTLlamaBlock(h, args.heads, args.kv_heads, args.ffn_hidden)
                                         for _ in range(args.layers)])
            self.norm = mt.make_rmsnorm(h)
            cos, sin = mt.rope_tables(args.seq_len, h // args.heads)
            self.register_buffer("rope_cos", cos, persistent=False)
            self.register_buffer("rope_sin", sin, persistent=False)
        self.head = nn.Linear(h, args.vocab, bias=False)

    def forward(self, idx):
        t = idx.shape[1]
        if self.family == "gpt":
            x = self.wte(idx) + self.wpe(torch.arange(t, device=idx.device))
            for blk in self.blocks:
                x = blk(x)
        else:
            x = self.tok(idx)
            for blk in self.blocks:
                x = blk(x, self.rope_cos[:t], self.rope_sin[:t])
        return self.head(self.norm(x))

    def matmul_weight_params(self):
        return sum(m.weight.numel() for m in self.modules() if isinstance(m, nn.Linear))


def parallelize_dtensor(model, mesh, loss_mode):
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    try:
        from torch.distributed.tensor import Replicate, Shard
    except ImportError:  # older PyTorch
        from torch.distributed._tensor import Replicate, Shard
    if model.family == "gpt":
        plan = {"q": ColwiseParallel(), "k": ColwiseParallel(), "v": ColwiseParallel(), "proj": RowwiseParallel(),
                "fc1": ColwiseParallel(), "fc2": RowwiseParallel()}
    else:
        plan = {"wq": ColwiseParallel(), "wk": ColwiseParallel(), "wv": ColwiseParallel(), "wo": RowwiseParallel(),
                "w1": ColwiseParallel(), "w3": ColwiseParallel(), "w2": RowwiseParallel()}
    for blk in model.blocks:
        parallelize_module(blk, mesh, plan)
    if loss_mode == "parallel":
        head = ColwiseParallel(input_layouts=Replicate(), output_layouts=Shard(-1), use_local_output=False)
    else:
        head = ColwiseParallel(input_layouts=Replicate(), output_layouts=Replicate())
    parallelize_module(model, mesh, {"head": head})
    return ("parallelize_module: ColwiseParallel %s, RowwiseParallel %s per block; head ColwiseParallel with %s; "
            "embeddings and norms replicated (plain tensors)" % (
                ",".join(k for k, v in plan.items() if isinstance(v, ColwiseParallel)),
                ",".join(k for k, v in plan.items() if isinstance(v, RowwiseParallel)),
                "output Shard(-1) and loss_parallel (vocabulary-parallel cross-entropy)" if loss_mode == "parallel"
                else "output Replicate (all-gathered logits), plain cross-entropy"))


# ---------------------------------------------------------------------------
def parse_args(argv=None):
    # allow_abbrev=False: otherwise "--micro-batch 4" is taken as an abbreviation of
    # --micro-batches and measure_train's --micro-batch stays 1 (the first multi-GPU batch did that).
    p = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    p.add_argument("--mode", choices=["ddp", "fsdp", "tp", "dtp", "pp"], required=True)
    p.add_argument("--tp", type=int, default=None, help="tensor-parallel size (tp: default all ranks; pp: default 1)")
    p.add_argument("--pp", type=int, default=None, help="pipeline stages (pp mode; default world / tp)")
    p.add_argument("--micro-batches", type=int, default=None, help="micro-batches per step (pp mode; default 4)")
    p.add_argument("--bucket-cap-mb", type=float, default=25.0, help="DDP gradient bucket size")
    p.add_argument("--fsdp-impl", choices=["fsdp1", "fsdp2"], default="fsdp1")
    p.add_argument("--fsdp-sharding", choices=["full", "grad_op"], default="full")
    p.add_argument("--fsdp-mp", choices=["none", "bf16"], default="none",
                   help="none: no MixedPrecision policy (fp32 parameters and gradients travel); bf16: param_dtype bf16")
    p.add_argument("--fsdp-reduce-dtype", choices=["bf16", "fp32"], default="fp32", help="with --fsdp-mp bf16")
    p.add_argument("--fsdp-backward-prefetch", choices=["pre", "post", "none"], default="pre")
    p.add_argument("--fsdp-forward-prefetch", action="store_true")
    p.add_argument("--fsdp-no-limit-all-gathers", action="store_true")
    p.add_argument("--profile-steps", type=int, default=0,
                   help="after the timed steps, run this many more under torch.profiler and record where the "
                        "GPU time of each rank goes (kernel classes, NCCL overlap, idle)")
    p.add_argument("--dtp-loss", choices=["parallel", "replicate"], default="parallel")
    p.add_argument("--dtp-gpt-bias", choices=["on", "off"], default="on",
                   help="dtp, GPT: biases on the block's Linears (off: to measure what they cost)")
    own, rest = p.parse_known_args(argv)
    args = mt.parse_args(rest)
    for k, v in vars(own).items():
        setattr(args, k, v)
    return args


def kernel_class(name):
    """The class of a CUDA kernel (or memcpy/memset) by its name, as the cost model splits work."""
    n = name.lower()
    if "nccl" in n:
        return "nccl"
    if any(k in n for k in ("sdpa", "flash", "fmha", "cudnn::fusion", "attention")):
        return "attention"
    if any(k in n for k in ("gemm", "nvjet", "cutlass", "xmma", "cublas")):
        return "gemm"
    if "multi_tensor_apply" in n or "adam" in n:
        return "optimizer"
    if n.startswith("memcpy") or n.startswith("memset"):
        return "memcpy"
    return "memory_bound"


def is_annotation(e):
    """A record_function range shown on the GPU timeline (e.g. "nccl:all_reduce",
    "Optimizer.step#AdamW.step"): it spans kernels already counted, so it is not one."""
    if getattr(e, "is_user_annotation", False):
        return True
    n = e.name  # ranges have dotted or colon names without the parentheses or spaces of kernels
    return not any(c in n for c in "(< ") and any(c in n for c in ".:#")


def union_length(intervals):
    """Total length covered by [start, end) intervals."""
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def intersect_length(a, b):
    """Length covered by both interval sets (each merged first)."""
    def merged(iv):
        out = []
        for s, e in sorted(iv):
            if out and s <= out[-1][1]:
                out[-1][1] = max(out[-1][1], e)
            else:
                out.append([s, e])
        return out
    a, b = merged(a), merged(b)
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def profile_steps(step, first_index, n_steps, dev):
    """Runs n_steps more steps under torch.profiler (CUDA activity) and returns, per step on
    this rank: GPU time per kernel class (summed over kernels, so overlapping streams add up),
    the time covered by compute kernels, by NCCL kernels and by both (overlap), the time the GPU
    ran nothing inside the profiled window (waiting for the host or for a peer), and the 30
    longest kernels by name."""
    from torch.profiler import profile, ProfilerActivity
    torch.cuda.synchronize()
    dist.barrier()
    t0 = time.perf_counter()
    # CUDA activity only: recording CPU ops slows the host enough to starve the GPU (a first
    # run with CPU activity doubled the profiled window of a 4-way tensor-parallel step).
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for k in range(n_steps):
            step(first_index + k, None)
        torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    by_class, by_name, launches = {}, {}, {}
    compute, comm, every = [], [], []
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CUDA or is_annotation(e):
            continue
        s, t = e.time_range.start * 1e-6, e.time_range.end * 1e-6
        if t <= s:
            continue
        c = kernel_class(e.name)
        by_class[c] = by_class.get(c, 0.0) + (t - s)
        by_name[e.name] = by_name.get(e.name, 0.0) + (t - s)
        launches[c] = launches.get(c, 0) + 1
        every.append((s, t))
        (comm if c == "nccl" else compute).append((s, t))
    window = (max(t for _, t in every) - min(s for s, _ in every)) if every else 0.0
    busy = union_length(every)
    top = sorted(by_name.items(), key=lambda kv: -kv[1])[:30]
    per = 1.0 / n_steps
    return {
        "steps": n_steps,
        "wall_time_per_step_s": wall * per,
        "kernel_window_per_step_s": window * per,
        "kernel_time_per_step_s": {c: v * per for c, v in sorted(by_class.items())},
        "launches_per_step": {c: v / n_steps for c, v in sorted(launches.items())},
        "compute_busy_per_step_s": union_length(compute) * per,
        "nccl_busy_per_step_s": union_length(comm) * per,
        "compute_nccl_overlap_per_step_s": intersect_length(compute, comm) * per,
        "gpu_busy_per_step_s": busy * per,
        "gpu_idle_per_step_s": (window - busy) * per,
        "top_kernels": [{"name": n[:200], "class": kernel_class(n), "time_per_step_s": v * per} for n, v in top],
        "note": ("torch.profiler with CUDA activity, record_function ranges left out; kernel "
                 "times summed per class count overlapping streams twice; idle = window - time covered by "
                 "any kernel"),
    }


def make_groups(world, rank, dp, tp, pp):
    """Process groups (every rank creates every group, in the same order). Layout:
    rank = stage * dp * tp + dp_rank * tp + tp_rank."""
    stage, rem = divmod(rank, dp * tp)
    dp_rank, tp_rank = divmod(rem, tp)

    def mk(ranks):  # the same decision on every rank, so every rank makes the same new_group calls
        if len(ranks) == world:
            return dist.group.WORLD
        return dist.new_group(ranks) if len(ranks) > 1 else None

    tp_group = dp_group = pp_group = None
    for s in range(pp):
        for d in range(dp):
            ranks = [s * dp * tp + d * tp + t for t in range(tp)]
            g = mk(ranks)
            if rank in ranks:
                tp_group = g
    for s in range(pp):
        for t in range(tp):
            ranks = [s * dp * tp + d * tp + t for d in range(dp)]
            g = mk(ranks)
            if rank in ranks:
                dp_group = g
    for d in range(dp):
        for t in range(tp):
            ranks = [s * dp * tp + d * tp + t for s in range(pp)]
            g = mk(ranks)
            if rank in ranks:
                pp_group = g
    return stage, dp_rank, tp_rank, tp_group, dp_group, pp_group


def main(argv=None):
    global TP_GROUP
    args = parse_args(argv)
    if os.environ.get("NCCL_NVLS_ENABLE") != "0":
        print("NCCL_NVLS_ENABLE must be 0 (NVLink multicast stays off)", file=sys.stderr)
        return 2
    if "LOCAL_RANK" not in os.environ:
        print("launch with torchrun (torchrun --standalone --nproc-per-node N %s ...)" % SOURCE, file=sys.stderr)
        return 2
    local_rank = int(os.environ["LOCAL_RANK"])
    dev = torch.device("cuda", local_rank)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    mode = args.mode
    if mode in ("ddp", "fsdp"):
        tp, pp = 1, 1
    elif mode == "dtp":
        tp, pp = world, 1
    elif mode == "tp":
        tp, pp = (args.tp or world), 1
    else:
        tp = args.tp or 1
        pp = args.pp or world // tp
    dp = world // (tp * pp) if world % (tp * pp) == 0 else 0
    M = (args.micro_batches or 4) if mode == "pp" else 1

    env = mt.environment_info(args)
    env["world_size"] = world
    env["nccl"] = ".".join(str(v) for v in torch.cuda.nccl.version())
    env["nccl_nvls_enable"] = os.environ.get("NCCL_NVLS_ENABLE")
    env["nccl_algo"] = os.environ.get("NCCL_ALGO")
    env["launcher"] = "torchrun, one process a GPU, NCCL backend"
    env["rank_layout"] = "rank = stage*dp*tp + dp_rank*tp + tp_rank"
    framework, fw_opts, zero = None, {}, 0
    measured, err, rc = {}, None, 0
    t_start = time.time()
    tied = False
    try:
        if dp < 1 or dp * tp * pp != world:
            raise ValueError("world size %d is not dp*tp*pp with tp=%d, pp=%d" % (world, tp, pp))
        if args.profile_steps > args.steps:
            raise ValueError("--profile-steps %d exceeds --steps %d (profiled steps reuse measured batches)"
                             % (args.profile_steps, args.steps))
        if mode == "pp" and dp != 1:
            raise ValueError("pp mode runs dp=1 only (tp * pp must be the world size)")
        if mode == "pp" and (args.layers % pp or M < 1):
            raise ValueError("layers %d must divide by pp %d" % (args.layers, pp))
        stage, dp_rank, tp_rank, tp_group, dp_group, pp_group = make_groups(world, rank, dp, tp, pp)
        TP_GROUP = tp_group
        first, last = stage == 0, stage == pp - 1
        if tp > 1:
            for what, v in (("heads", args.heads), ("kv-heads", args.kv_heads), ("ffn-hidden", args.ffn_hidden),
                            ("vocab", args.vocab)):
                if v % tp:
                    raise ValueError("%s %d is not divisible by the tensor-parallel size %d" % (what, v, tp))
        amp_dtype = torch.bfloat16 if args.precision == "amp-bf16" else torch.float32
        hd = args.hidden // args.heads
        mt.ATTN, grad_fn, notes = mt.choose_attention(args.attention, args.micro_batch, args.heads // tp,
                                                      args.kv_heads // tp, args.seq_len, hd, amp_dtype)
        env["attention_kernel"] = "sdpa %s, autograd node %s" % (mt.ATTN.backend, grad_fn)
        env["attention_backend"] = mt.ATTN.backend
        env["attention_gqa"] = mt.ATTN.gqa_mode
        if notes:
            env["attention_notes"] = notes

        # Same weights on every rank of a data-parallel group (same seed); tensor-parallel shards
        # differ. Built directly on the GPU.
        # DTensor: one seed everywhere (replicated embeddings and norms are plain tensors).
        torch.manual_seed(args.seed + (0 if mode == "dtp" else tp_rank + 100 * stage))
        if mode in ("ddp", "fsdp"):
            with torch.device(dev):
                if args.family == "gpt":
                    model = mt.GPT(args.vocab, args.seq_len, args.hidden, args.layers, args.heads, args.ffn_hidden)
                else:
                    model = mt.Llama(args.vocab, args.seq_len, args.hidden, args.layers, args.heads,
                                     args.kv_heads, args.ffn_hidden)
            tied = args.family == "gpt"
            mt.init_weights(model)
            n_matmul = model.matmul_weight_params()
            n_params = sum(prm.numel() for prm in model.parameters())
        elif mode == "dtp":
            with torch.device(dev):
                model = DTModel(args)
            mt.init_weights(model)
            n_matmul = model.matmul_weight_params()
            n_params = sum(prm.numel() for prm in model.parameters())
        else:  # tp, pp: Megatron-style stage models
            with torch.device(dev):
                model = StageModel(args, args.layers // pp, first, last, tp, tp_rank)
            mt.init_weights(model)
            if tp > 1:
                # Replicated parameters (embeddings, norms, biases after reductions) must agree.
                src = dist.get_global_rank(tp_group, 0) if tp < world else 0
                for name, prm in model.named_parameters():
                    if not any(s in name for s in TP_SHARDED):
                        dist.broadcast(prm.data, src, group=tp_group)
            # Whole-model counts: shards summed over the tensor-parallel ranks, replicated
            # parameters counted once (tp_rank 0), stages summed, data-parallel copies divided out.
            sharded = sum(prm.numel() for name, prm in model.named_parameters()
                          if tp > 1 and any(s in name for s in TP_SHARDED))
            replicated = sum(prm.numel() for prm in model.parameters()) - sharded
            counts = torch.tensor([float(model.matmul_weight_params()),
                                   float(sharded + (replicated if tp_rank == 0 else 0))], device=dev,
                                  dtype=torch.float64)
            dist.all_reduce(counts)
            n_matmul, n_params = int(counts[0].item()) // dp, int(counts[1].item()) // dp
        model.train()

        forward = model
        if mode == "ddp":
            forward = nn.parallel.DistributedDataParallel(model, device_ids=[local_rank],
                                                          bucket_cap_mb=args.bucket_cap_mb,
                                                          gradient_as_bucket_view=True)
            framework = "pytorch-ddp"
            fw_opts = {"bucket_cap_mb": args.bucket_cap_mb, "gradient_as_bucket_view": True,
                       "find_unused_parameters": False, "static_graph": False}
            env["ddp"] = "DistributedDataParallel(bucket_cap_mb=%g, gradient_as_bucket_view=True)" % args.bucket_cap_mb
        elif mode == "fsdp":
            framework = "pytorch-fsdp"
            block_types = {mt.GPTBlock, mt.LlamaBlock}
            bf16 = torch.bfloat16
            reduce_dtype = bf16 if args.fsdp_reduce_dtype == "bf16" else torch.float32
            if args.fsdp_impl == "fsdp1":
                try:
                    from torch.distributed.fsdp import FullyShardedDataParallel  # noqa: F401
                except ImportError as e:  # FSDP1 gone from this PyTorch: use FSDP2
                    env["fsdp_note"] = "FullyShardedDataParallel unavailable (%s); fully_shard (FSDP2) used" % e
                    args.fsdp_impl = "fsdp2"
            if args.fsdp_impl == "fsdp1":
                from torch.distributed.fsdp import BackwardPrefetch, MixedPrecision, ShardingStrategy
                from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
                from torch.distributed.fsdp.wrap import ModuleWrapPolicy
                mp = (MixedPrecision(param_dtype=bf16, reduce_dtype=reduce_dtype, buffer_dtype=None)
                      if args.fsdp_mp == "bf16" else None)
                strategy = ShardingStrategy.FULL_SHARD if args.fsdp_sharding == "full" else ShardingStrategy.SHARD_GRAD_OP
                prefetch = {"pre": BackwardPrefetch.BACKWARD_PRE, "post": BackwardPrefetch.BACKWARD_POST,
                            "none": None}[args.fsdp_backward_prefetch]
                forward = model = FSDP(model, auto_wrap_policy=ModuleWrapPolicy(block_types), sharding_strategy=strategy,
                                       mixed_precision=mp, backward_prefetch=prefetch,
                                       forward_prefetch=args.fsdp_forward_prefetch,
                                       limit_all_gathers=not args.fsdp_no_limit_all_gathers,
                                       device_id=dev, use_orig_params=False, sync_module_states=False)
                fw_opts = {"implementation": "FullyShardedDataParallel (FSDP1)",
                           "sharding_strategy": strategy.name,
                           "auto_wrap": "one unit per transformer block + root (embeddings, final norm)",
                           "mixed_precision": None if mp is None else {
                               "param_dtype": "bf16", "reduce_dtype": args.fsdp_reduce_dtype, "buffer_dtype": None},
                           "param_dtype": "bf16" if mp else "fp32",
                           "reduce_dtype": args.fsdp_reduce_dtype if mp else "fp32",
                           "reshard_after_forward": args.fsdp_sharding == "full",
                           "backward_prefetch": None if prefetch is None else prefetch.name,
                           "forward_prefetch": bool(args.fsdp_forward_prefetch),
                           "limit_all_gathers": not args.fsdp_no_limit_all_gathers,
                           "use_orig_params": False, "autocast": args.precision == "amp-bf16"}
            else:
                from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
                mp = (MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=reduce_dtype)
                      if args.fsdp_mp == "bf16" else MixedPrecisionPolicy())
                reshard = args.fsdp_sharding == "full"
                for blk in model.blocks:
                    fully_shard(blk, mp_policy=mp, reshard_after_forward=reshard)
                fully_shard(model, mp_policy=mp, reshard_after_forward=reshard)
                fw_opts = {"implementation": "fully_shard (FSDP2)", "sharding_strategy":
                           "FULL_SHARD" if reshard else "SHARD_GRAD_OP",
                           "auto_wrap": "fully_shard on every transformer block, then the root",
                           "param_dtype": "bf16" if args.fsdp_mp == "bf16" else "fp32",
                           "reduce_dtype": args.fsdp_reduce_dtype if args.fsdp_mp == "bf16" else "fp32",
                           "reshard_after_forward": reshard, "backward_prefetch": "implicit (FSDP2)",
                           "forward_prefetch": False, "limit_all_gathers": None,
                           "autocast": args.precision == "amp-bf16"}
            zero = 3 if args.fsdp_sharding == "full" else 2
            env["fsdp"] = fw_opts["implementation"]
        elif mode == "dtp":
            from torch.distributed.device_mesh import init_device_mesh
            mesh = init_device_mesh("cuda", (world,))
            env["dtp"] = parallelize_dtensor(model, mesh, args.dtp_loss)
            framework = "pytorch-tp-dtensor"
            fw_opts = {"api": "torch.distributed.tensor.parallel.parallelize_module", "loss": args.dtp_loss,
                       "sequence_parallel": False, "qkv": "separate q, k, v projections"}
        elif mode == "tp":
            framework = "megatron-style-tp"
            fw_opts = {"sequence_parallel": False, "logits": "vocabulary-parallel, untied",
                       "embeddings": "replicated"}
            env["tp"] = ("Megatron-style: column-parallel qkv/fc1, row-parallel proj/fc2, vocab-parallel untied "
                         "logits and cross-entropy, replicated embeddings; no sequence parallelism")
            if dp > 1:
                forward = nn.parallel.DistributedDataParallel(model, device_ids=[local_rank], process_group=dp_group,
                                                              bucket_cap_mb=args.bucket_cap_mb,
                                                              gradient_as_bucket_view=True)
                fw_opts.update({"data_parallel": "pytorch-ddp", "bucket_cap_mb": args.bucket_cap_mb})
                env["ddp"] = "DistributedDataParallel over the data-parallel group (bucket_cap_mb=%g)" % args.bucket_cap_mb
        else:
            framework = "pipeline-1f1b"
            fw_opts = {"schedule": "1f1b (Megatron's forward_backward_pipelining_without_interleaving)",
                       "p2p": "torch.distributed.batch_isend_irecv, send-forward/recv-backward combined",
                       "micro_batches": M, "logits": "untied",
                       "tensor_parallel": "megatron-style-tp" if tp > 1 else None}
            if tp > 1:
                env["tp"] = "Megatron-style tensor parallelism inside each stage"

        # This rank's parameter elements (FSDP: its shards; DTensor: local shards).
        local_params = sum((prm.to_local() if hasattr(prm, "to_local") else prm).numel() for prm in model.parameters())

        # Optimizer: fused AdamW; DTensor and plain parameters in separate groups (one fused call each).
        params = list(model.parameters())
        if mode == "dtp":
            try:
                from torch.distributed.tensor import DTensor
            except ImportError:
                from torch.distributed._tensor import DTensor
            groups = [{"params": [q for q in params if isinstance(q, DTensor)]},
                      {"params": [q for q in params if not isinstance(q, DTensor)]}]
            groups = [g for g in groups if g["params"]]
        else:
            groups = params
        opt = torch.optim.AdamW(groups, lr=1e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, fused=True)
        env["optimizer_impl"] = "torch.optim.AdamW fused=True" + (
            " (DTensor and plain parameters in two groups)" if mode == "dtp" else "")

        tokens_rank = args.micro_batch * args.seq_len * M
        g = torch.Generator(device=dev)
        # Data-parallel ranks see different data; tensor-parallel ranks and pipeline stages the same.
        g.manual_seed(args.seed + 1000 + dp_rank)
        n_batches = args.warmup + args.steps
        shape = (n_batches, M, args.micro_batch, args.seq_len)
        all_idx = torch.randint(0, args.vocab, shape, device=dev, generator=g)
        all_tgt = torch.randint(0, args.vocab, shape, device=dev, generator=g)
        env["data"] = "uniform random token ids and targets, a fresh batch every step"

        def autocast():
            return torch.autocast(device_type="cuda", dtype=amp_dtype, enabled=args.precision == "amp-bf16")

        loss_ctx = None
        if mode == "dtp" and args.dtp_loss == "parallel":
            from torch.distributed.tensor.parallel import loss_parallel as loss_ctx

        import contextlib

        def step_plain(i, ev):
            if ev is not None:
                ev[0].record()
            with (loss_ctx() if loss_ctx else contextlib.nullcontext()):
                with autocast(), mt.ATTN.context():
                    logits = forward(all_idx[i, 0])
                    if mode in ("tp",):
                        loss = model.loss(logits, all_tgt[i, 0])
                    elif loss_ctx is not None:
                        loss = F.cross_entropy(logits.flatten(0, 1).float(), all_tgt[i, 0].flatten(0, 1))
                    else:
                        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), all_tgt[i, 0].reshape(-1))
                if ev is not None:
                    ev[1].record()
                loss.backward()  # DDP / FSDP overlap their gradient reductions with this
            if ev is not None:
                ev[2].record()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if ev is not None:
                ev[3].record()
            loss = loss.detach()
            return loss.full_tensor() if hasattr(loss, "full_tensor") else loss

        # --- 1F1B pipeline (Megatron's schedule without interleaving) ---
        act_shape = (args.micro_batch, args.seq_len, args.hidden)
        prev_rank = rank - dp * tp if not first else None
        next_rank = rank + dp * tp if not last else None

        def p2p(send_t=None, send_to=None, recv_from=None):
            ops, out = [], None
            if send_t is not None:
                ops.append(dist.P2POp(dist.isend, send_t, send_to, group=pp_group))
            if recv_from is not None:
                out = torch.empty(act_shape, device=dev, dtype=torch.float32)
                ops.append(dist.P2POp(dist.irecv, out, recv_from, group=pp_group))
            if ops:
                for req in dist.batch_isend_irecv(ops):
                    req.wait()
            return out

        def step_pipeline(i, ev):
            if ev is not None:
                ev[0].record()
            warm = min(pp - stage - 1, M)
            remaining = M - warm
            saved = []
            loss_sum = torch.zeros((), device=dev)
            mb_fwd = [0]

            def fwd(x):
                j = mb_fwd[0]
                mb_fwd[0] += 1
                with autocast(), mt.ATTN.context():
                    y = model(all_idx[i, j] if first else x)
                    if last:
                        y = model.loss(y, all_tgt[i, j]) / M
                if not last:
                    y = y.float()
                return y

            def bwd(x, y, gy):
                if last:
                    y.backward()
                else:
                    torch.autograd.backward(y, grad_tensors=gy)
                return None if first else x.grad

            def recv_fwd():
                if first:
                    return None
                x = p2p(recv_from=prev_rank)
                return x.requires_grad_(True)

            for _ in range(warm):
                x = recv_fwd()
                y = fwd(x)
                p2p(send_t=y.detach(), send_to=next_rank)
                saved.append((x, y))
            x = recv_fwd() if remaining > 0 else None
            for k in range(remaining):
                y = fwd(x)
                if last:
                    loss_sum += y.detach()
                    gy = None
                else:
                    gy = p2p(send_t=y.detach(), send_to=next_rank, recv_from=next_rank)
                saved.append((x, y))
                x0, y0 = saved.pop(0)
                gx = bwd(x0, y0, gy)
                if k == remaining - 1:
                    x = None
                    if not first:
                        p2p(send_t=gx, send_to=prev_rank)
                else:
                    x = p2p(send_t=gx, send_to=prev_rank, recv_from=prev_rank) if not first else None
                    if x is not None:
                        x.requires_grad_(True)
            for _ in range(warm):
                x0, y0 = saved.pop(0)
                gy = p2p(recv_from=next_rank)
                gx = bwd(x0, y0, gy)
                if not first:
                    p2p(send_t=gx, send_to=prev_rank)
            if ev is not None:
                ev[1].record()
                ev[2].record()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if ev is not None:
                ev[3].record()
            return loss_sum

        step = step_pipeline if mode == "pp" else step_plain
        if mode == "pp":
            dist.barrier()
            warmup_t = torch.ones(1, device=dev)
            dist.all_reduce(warmup_t, group=pp_group)  # the pipeline group's communicator exists before p2p

        first_loss = None
        for i in range(args.warmup):
            loss = step(i, None)
            if i == 0:
                first_loss = float(loss.float().item())
        torch.cuda.synchronize()
        static_mem = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        dist.barrier()
        events = [[torch.cuda.Event(enable_timing=True) for _ in range(4)] for _ in range(args.steps)]
        w0 = time.perf_counter()
        last_l = None
        for i in range(args.steps):
            last_l = step(args.warmup + i, events[i])
        torch.cuda.synchronize()
        wall = time.perf_counter() - w0

        # Per-step times of every rank; a step lasts as long as its slowest rank.
        local = torch.tensor([[e[0].elapsed_time(e[1]), e[1].elapsed_time(e[2]), e[2].elapsed_time(e[3]),
                               e[0].elapsed_time(e[3]), e[0].elapsed_time(e[2])] for e in events],
                             device=dev, dtype=torch.float64) * 1e-3
        gathered = [torch.empty_like(local) for _ in range(world)]
        dist.all_gather(gathered, local)
        per_rank = torch.stack(gathered)               # [rank, step, part]
        slowest = per_rank.max(dim=0).values.cpu()     # [step, part]
        peak = torch.tensor([torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved(), static_mem],
                            device=dev, dtype=torch.float64)
        dist.all_reduce(peak, op=dist.ReduceOp.MAX)
        # Losses as the last rank (a last pipeline stage) sees them.
        losses = torch.tensor([first_loss if first_loss is not None else float("nan"),
                               float(last_l.float().item())], device=dev, dtype=torch.float64)
        lg = [torch.empty_like(losses) for _ in range(world)]
        dist.all_gather(lg, losses)
        first_loss, last_loss = float(lg[-1][0].item()), float(lg[-1][1].item())
        fwd_t, bwd_t, opt_t, stp, fb = (slowest[:, k].tolist() for k in range(5))
        prof_all = None
        if args.profile_steps > 0:
            prof_rank = profile_steps(step, args.warmup + args.steps - args.profile_steps, args.profile_steps, dev)
            prof_all = [None] * world
            dist.all_gather_object(prof_all, prof_rank)
        step_med = mt.med(stp)
        tokens = tokens_rank * dp
        attn_flops = 12.0 * args.layers * args.seq_len * args.hidden * tokens
        model_flops = 6.0 * n_matmul * tokens + attn_flops
        measured = {
            "step_time_s": step_med,
            "forward_time_s": mt.med(fwd_t) if mode != "pp" else None,
            "backward_time_s": mt.med(bwd_t) if mode != "pp" else None,
            "forward_backward_time_s": mt.med(fb),
            "optimizer_time_s": mt.med(opt_t),
            "peak_memory_bytes": int(peak[0].item()),
            "peak_reserved_bytes": int(peak[1].item()),
            "static_memory_bytes": int(peak[2].item()),
            "memory_note": "per GPU, the largest over ranks",
            "tokens_per_s": tokens / step_med,
            "parameters": int(n_params),
            "parameters_per_rank": int(local_params),
            "matmul_weight_parameters": int(n_matmul),
            "tokens_per_step": tokens,
            "steps_measured": args.steps,
            "warmup_steps": args.warmup,
            "step_times_s": stp,
            "forward_times_s": fwd_t if mode != "pp" else None,
            "backward_times_s": bwd_t if mode != "pp" else None,
            "optimizer_times_s": opt_t,
            "step_times_per_rank_s": per_rank[:, :, 3].cpu().tolist(),
            "step_time_min_s": min(stp),
            "step_time_max_s": max(stp),
            "step_time_mean_s": sum(stp) / len(stp),
            "wall_time_per_step_s": wall / args.steps,
            "model_flops_per_step": model_flops,
            "model_flops_formula": "6 * matmul_weight_parameters * tokens + 12 * layers * seq_len * hidden * tokens",
            "model_tflops_per_s": model_flops / step_med / 1e12,
            "loss_first_warmup_step": first_loss,
            "loss_last_step": last_loss,
        }
        if prof_all is not None:
            measured["profile_per_rank"] = prof_all
        if mode == "pp":
            measured["pipeline_note"] = ("forward and backward interleave (1F1B): forward_backward_time_s is the "
                                         "whole schedule; forward_time_s and backward_time_s are not separable")
        if not math.isfinite(last_loss):
            raise RuntimeError("non-finite loss %r" % last_loss)
    except Exception as e:  # noqa: BLE001 - record any failure in the output
        etype = "oom" if isinstance(e, torch.cuda.OutOfMemoryError) else type(e).__name__
        err = {"type": etype, "message": str(e)[:2000], "traceback": traceback.format_exc()[-4000:]}
        rc = 4
    env["run_wall_time_s"] = time.time() - t_start
    if rank == 0 or err is not None:
        doc = mt.build_document(args, measured, env, error=err)
        doc["source"] = SOURCE
        tr = doc["scenario"]["training"]
        tr["global_batch"] = args.micro_batch * M * max(dp, 1)
        tr["framework"] = framework or {"ddp": "pytorch-ddp", "fsdp": "pytorch-fsdp", "tp": "megatron-style-tp",
                                        "dtp": "pytorch-tp-dtensor", "pp": "pipeline-1f1b"}[mode]
        tr["framework_options"] = fw_opts
        doc["scenario"]["model"]["tie_embeddings"] = tied
        doc["scenario"]["cluster"]["gpus_per_node"] = world
        plan = {"dp": dp, "tp": tp, "pp": pp, "micro_batches": M, "zero": zero}
        if mode == "pp":
            plan["schedule"] = "1f1b"
        doc["scenario"]["plan"] = plan
        out = args.out if rank == 0 else "%s.rank%d" % (args.out, rank)
        mt.write_json(out, doc)
        if err is None:
            fwd_ms = measured["forward_time_s"] * 1e3 if measured["forward_time_s"] is not None else float("nan")
            bwd_ms = measured["backward_time_s"] * 1e3 if measured["backward_time_s"] is not None else float("nan")
            print("%-30s %s dp%d tp%d pp%d  step %8.2f ms (fwd %7.2f, bwd %7.2f, opt %6.2f)  peak %6.2f GiB  "
                  "%9.0f tok/s  %6.1f TFLOP/s  loss %.3f->%.3f" % (
                      args.name, mode, dp, tp, pp, step_med * 1e3, fwd_ms, bwd_ms,
                      measured["optimizer_time_s"] * 1e3, measured["peak_memory_bytes"] / 2**30,
                      measured["tokens_per_s"], measured["model_tflops_per_s"], first_loss, last_loss))
            for r, pr in enumerate(measured.get("profile_per_rank") or []):
                kt = pr["kernel_time_per_step_s"]
                print("    rank %d profile: window %.2f ms, busy %.2f, idle %.2f, nccl busy %.2f (overlapped %.2f); %s" % (
                    r, pr["kernel_window_per_step_s"] * 1e3, pr["gpu_busy_per_step_s"] * 1e3,
                    pr["gpu_idle_per_step_s"] * 1e3, pr["nccl_busy_per_step_s"] * 1e3,
                    pr["compute_nccl_overlap_per_step_s"] * 1e3,
                    ", ".join("%s %.2f" % (c, v * 1e3) for c, v in kt.items())))
        else:
            print("%s FAILED on rank %d: %s\n%s" % (args.name, rank, err["message"], err["traceback"]), file=sys.stderr)
    try:
        dist.destroy_process_group()
    except Exception:  # noqa: BLE001
        pass
    return rc


if __name__ == "__main__":
    sys.exit(main())

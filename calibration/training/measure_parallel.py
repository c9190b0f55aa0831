#!/usr/bin/env python3
"""Measured multi-GPU training run (one host) for clustersim calibration.

Two modes, launched with torchrun (one process a GPU):
  --mode ddp  data parallelism: measure_train.py's model wrapped in
              torch.nn.parallel.DistributedDataParallel; plan dp=N, tp=1.
  --mode tp   Megatron-style tensor parallelism of a GPT transformer: column-parallel QKV and
              fc1, row-parallel proj and fc2 (one all-reduce after each in forward, one before
              each column-parallel layer in backward), a vocabulary-parallel logits layer with a
              vocabulary-parallel cross-entropy, and a replicated embedding; plan dp=1, tp=N.

  torchrun --standalone --nproc-per-node 8 calibration/training/measure_parallel.py --mode ddp \
      --family gpt --hidden 2048 --layers 24 --heads 16 --seq-len 2048 --micro-batch 4 --out ddp.json

It writes one "clustersim-measured-run/1" document (rank 0) with the model, training and
plan the estimator needs, and the same measured fields as measure_train.py. Every rank times
its steps with CUDA events (no host synchronisation inside the measured loop); a step's time
is the slowest rank's, and the reported figures are medians over the measured steps.
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

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure_train as mt  # noqa: E402

SOURCE = "calibration/training/measure_parallel.py"


# ---------------------------------------------------------------------------
# Tensor parallelism (Megatron-LM's f and g operators)
# ---------------------------------------------------------------------------
class _CopyToTP(torch.autograd.Function):
    """f: identity forward; all-reduce of the gradient backward (input of a column-parallel layer)."""

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        g = g.contiguous()
        dist.all_reduce(g)
        return g


class _ReduceFromTP(torch.autograd.Function):
    """g: all-reduce forward; identity backward (output of a row-parallel layer). The output
    is replicated, so every rank already holds the whole gradient."""

    @staticmethod
    def forward(ctx, x):
        x = x.contiguous()
        dist.all_reduce(x)
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


class TPGPT(nn.Module):
    """GPT with tensor-parallel blocks; the logits weight is split by vocabulary (untied)."""

    def __init__(self, vocab, seq_len, hidden, layers, heads, ffn_hidden, tp, rank):
        super().__init__()
        self.tp, self.rank = tp, rank
        self.local_vocab = vocab // tp
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(seq_len, hidden)
        self.blocks = nn.ModuleList([TPBlock(hidden, heads, ffn_hidden, tp) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(hidden)
        self.lm_head = nn.Linear(hidden, self.local_vocab, bias=False)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for blk in self.blocks:
            x = blk(x)
        return self.lm_head(_CopyToTP.apply(self.ln_f(x)))  # [b, t, vocab / tp]

    def loss(self, local_logits, tgt):
        """Cross-entropy over logits split by vocabulary, without gathering them."""
        z = local_logits.float().view(-1, self.local_vocab)
        t = tgt.reshape(-1)
        m = z.detach().max(dim=-1).values
        dist.all_reduce(m, op=dist.ReduceOp.MAX)
        z = z - m.unsqueeze(1)
        sum_exp = _ReduceFromTP.apply(z.exp().sum(dim=-1))
        lo = self.rank * self.local_vocab
        inside = (t >= lo) & (t < lo + self.local_vocab)
        local_t = torch.where(inside, t - lo, torch.zeros_like(t))
        picked = z.gather(1, local_t.unsqueeze(1)).squeeze(1) * inside
        picked = _ReduceFromTP.apply(picked)
        return (torch.log(sum_exp) - picked).mean()

    def matmul_weight_params(self):
        """Matmul weights of the whole (unsplit) model, as measure_train.py counts them."""
        per_rank_split = sum(m.weight.numel() for m in self.modules() if isinstance(m, nn.Linear))
        return per_rank_split * self.tp


# ---------------------------------------------------------------------------
def parse_args(argv=None):
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--mode", choices=["ddp", "tp"], required=True)
    p.add_argument("--bucket-cap-mb", type=float, default=25.0, help="DDP gradient bucket size")
    own, rest = p.parse_known_args(argv)
    args = mt.parse_args(rest)
    args.mode, args.bucket_cap_mb = own.mode, own.bucket_cap_mb
    return args


def main(argv=None):
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

    env = mt.environment_info(args)
    env["world_size"] = world
    env["nccl"] = ".".join(str(v) for v in torch.cuda.nccl.version())
    env["nccl_nvls_enable"] = os.environ.get("NCCL_NVLS_ENABLE")
    env["nccl_algo"] = os.environ.get("NCCL_ALGO")
    env["launcher"] = "torchrun, one process a GPU, NCCL backend"
    measured, err, rc = {}, None, 0
    t_start = time.time()
    try:
        tp = world if args.mode == "tp" else 1
        if args.mode == "tp":
            if args.family != "gpt":
                raise ValueError("--mode tp builds the gpt family only")
            for what, v in (("heads", args.heads), ("ffn-hidden", args.ffn_hidden), ("vocab", args.vocab)):
                if v % tp:
                    raise ValueError("%s %d is not divisible by the tensor-parallel size %d" % (what, v, tp))
        amp_dtype = torch.bfloat16 if args.precision == "amp-bf16" else torch.float32
        hd = args.hidden // args.heads
        mt.ATTN, grad_fn, notes = mt.choose_attention(args.attention, args.micro_batch, args.heads // tp,
                                                      args.kv_heads // tp, args.seq_len, hd, amp_dtype)
        env["attention_kernel"] = "sdpa %s, autograd node %s" % (mt.ATTN.backend, grad_fn)
        env["attention_backend"] = mt.ATTN.backend
        if notes:
            env["attention_notes"] = notes

        # Same weights on every rank of a data-parallel group; different shards in TP.
        torch.manual_seed(args.seed + (rank if args.mode == "tp" else 0))
        with torch.device(dev):
            if args.mode == "tp":
                model = TPGPT(args.vocab, args.seq_len, args.hidden, args.layers, args.heads,
                              args.ffn_hidden, tp, rank)
            elif args.family == "gpt":
                model = mt.GPT(args.vocab, args.seq_len, args.hidden, args.layers, args.heads, args.ffn_hidden)
            else:
                model = mt.Llama(args.vocab, args.seq_len, args.hidden, args.layers, args.heads,
                                 args.kv_heads, args.ffn_hidden)
        mt.init_weights(model)
        if args.mode == "tp":
            # Replicated parameters (embeddings, norms, biases after reductions) must agree.
            for name, prm in model.named_parameters():
                if not any(s in name for s in (".qkv.", ".proj.", ".fc1.", ".fc2.", "lm_head")):
                    dist.broadcast(prm.data, 0)
        model.train()
        n_matmul = model.matmul_weight_params()
        local_params = sum(prm.numel() for prm in model.parameters())
        if args.mode == "ddp":
            ddp = nn.parallel.DistributedDataParallel(model, device_ids=[local_rank],
                                                      bucket_cap_mb=args.bucket_cap_mb,
                                                      gradient_as_bucket_view=True)
            env["ddp"] = "DistributedDataParallel(bucket_cap_mb=%g, gradient_as_bucket_view=True)" % args.bucket_cap_mb
            forward = ddp
        else:
            env["tp"] = ("Megatron-style: column-parallel qkv/fc1, row-parallel proj/fc2, vocab-parallel untied "
                         "logits and cross-entropy, replicated embeddings; no sequence parallelism")
            forward = model
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1,
                                fused=True)
        env["optimizer_impl"] = "torch.optim.AdamW fused=True"

        tokens_rank = args.micro_batch * args.seq_len
        g = torch.Generator(device=dev)
        # DP ranks see different data; TP ranks must see the same batch.
        g.manual_seed(args.seed + 1000 + (rank if args.mode == "ddp" else 0))
        n_batches = args.warmup + args.steps
        all_idx = torch.randint(0, args.vocab, (n_batches, args.micro_batch, args.seq_len), device=dev, generator=g)
        all_tgt = torch.randint(0, args.vocab, (n_batches, args.micro_batch, args.seq_len), device=dev, generator=g)
        env["data"] = "uniform random token ids and targets, a fresh batch every step"

        def autocast():
            return torch.autocast(device_type="cuda", dtype=amp_dtype, enabled=args.precision == "amp-bf16")

        def step(i, ev):
            if ev is not None:
                ev[0].record()
            with autocast(), mt.ATTN.context():
                logits = forward(all_idx[i])
                if args.mode == "tp":
                    loss = model.loss(logits, all_tgt[i])
                else:
                    loss = F.cross_entropy(logits.view(-1, logits.size(-1)), all_tgt[i].reshape(-1))
            if ev is not None:
                ev[1].record()
            loss.backward()  # DDP overlaps its gradient all-reduce with this
            if ev is not None:
                ev[2].record()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if ev is not None:
                ev[3].record()
            return loss.detach()

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
        last = None
        for i in range(args.steps):
            last = step(args.warmup + i, events[i])
        torch.cuda.synchronize()
        wall = time.perf_counter() - w0
        last_loss = float(last.float().item())

        # Per-step times of every rank; a step lasts as long as its slowest rank.
        local = torch.tensor([[e[0].elapsed_time(e[1]), e[1].elapsed_time(e[2]), e[2].elapsed_time(e[3]),
                               e[0].elapsed_time(e[3])] for e in events], device=dev, dtype=torch.float64) * 1e-3
        gathered = [torch.empty_like(local) for _ in range(world)]
        dist.all_gather(gathered, local)
        per_rank = torch.stack(gathered)               # [rank, step, part]
        slowest = per_rank.max(dim=0).values.cpu()     # [step, part]
        peak = torch.tensor([torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved(), static_mem],
                            device=dev, dtype=torch.float64)
        dist.all_reduce(peak, op=dist.ReduceOp.MAX)
        fwd, bwd, opt_t, stp = (slowest[:, k].tolist() for k in range(4))
        step_med = mt.med(stp)
        tokens = tokens_rank * (world if args.mode == "ddp" else 1)
        attn_flops = 12.0 * args.layers * args.seq_len * args.hidden * tokens
        model_flops = 6.0 * n_matmul * tokens + attn_flops
        params = local_params if args.mode == "ddp" else None
        measured = {
            "step_time_s": step_med,
            "forward_time_s": mt.med(fwd),
            "backward_time_s": mt.med(bwd),
            "optimizer_time_s": mt.med(opt_t),
            "peak_memory_bytes": int(peak[0].item()),
            "peak_reserved_bytes": int(peak[1].item()),
            "static_memory_bytes": int(peak[2].item()),
            "memory_note": "per GPU, the largest over ranks",
            "tokens_per_s": tokens / step_med,
            "parameters_per_rank": int(local_params),
            "matmul_weight_parameters": int(n_matmul),
            "tokens_per_step": tokens,
            "steps_measured": args.steps,
            "warmup_steps": args.warmup,
            "step_times_s": stp,
            "forward_times_s": fwd,
            "backward_times_s": bwd,
            "optimizer_times_s": opt_t,
            "step_times_per_rank_s": per_rank[:, :, 3].cpu().tolist(),
            "step_time_min_s": min(stp),
            "step_time_max_s": max(stp),
            "wall_time_per_step_s": wall / args.steps,
            "model_flops_per_step": model_flops,
            "model_tflops_per_s": model_flops / step_med / 1e12,
            "loss_first_warmup_step": first_loss,
            "loss_last_step": last_loss,
        }
        if params is not None:
            measured["parameters"] = int(params)
        if not math.isfinite(last_loss):
            raise RuntimeError("non-finite loss %r" % last_loss)
    except Exception as e:  # noqa: BLE001 - record any failure in the output
        err = {"type": type(e).__name__, "message": str(e)[:2000], "traceback": traceback.format_exc()[-4000:]}
        rc = 4
    env["run_wall_time_s"] = time.time() - t_start
    if rank == 0 or err is not None:
        doc = mt.build_document(args, measured, env, error=err)
        doc["source"] = SOURCE
        dp = world if args.mode == "ddp" else 1
        doc["scenario"]["training"]["global_batch"] = args.micro_batch * dp
        doc["scenario"]["cluster"]["gpus_per_node"] = world
        doc["scenario"]["plan"] = {"dp": dp, "tp": world // dp, "pp": 1}
        out = args.out if rank == 0 else "%s.rank%d" % (args.out, rank)
        mt.write_json(out, doc)
        if err is None:
            print("%-28s %s x%d  step %8.2f ms (fwd %7.2f, bwd %7.2f, opt %6.2f)  peak %6.2f GiB  %9.0f tok/s  "
                  "%6.1f TFLOP/s  loss %.3f->%.3f" % (
                      args.name, args.mode, world, step_med * 1e3, measured["forward_time_s"] * 1e3,
                      measured["backward_time_s"] * 1e3, measured["optimizer_time_s"] * 1e3,
                      measured["peak_memory_bytes"] / 2**30, measured["tokens_per_s"],
                      measured["model_tflops_per_s"], first_loss, last_loss))
        else:
            print("%s FAILED on rank %d: %s\n%s" % (args.name, rank, err["message"], err["traceback"]), file=sys.stderr)
    dist.destroy_process_group()
    return rc


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Measured single-GPU training run for clustersim calibration.

Trains a hand-written transformer (GPT-2/Megatron style or Llama style) for a few steps on
random tokens and writes step time, its forward / backward / optimizer parts, peak memory and
throughput as one "clustersim-measured-run/1" JSON document.

Example:
  python3 calibration/training/measure_train.py --family gpt --hidden 768 --layers 12 \
      --heads 12 --seq-len 1024 --micro-batch 16 --name gpt-125m --out gpt-125m.json

Timing: CUDA events around forward (including the loss), backward and optimizer step
(optimizer.step() + zero_grad(set_to_none=True)) of every measured step, recorded without
host synchronisation inside the measured loop; medians over the measured steps after
--warmup un-timed steps. Peak memory: torch.cuda.max_memory_allocated() over the measured
steps (peak statistics reset after warm-up).
"""

import argparse
import contextlib
import datetime
import json
import math
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
import traceback

import torch
import torch.nn as nn
import torch.nn.functional as F

FORMAT = "clustersim-measured-run/1"
SOURCE = "calibration/training/measure_train.py"


# ---------------------------------------------------------------------------
# Attention
# ---------------------------------------------------------------------------
class AttentionConfig:
    """How scaled_dot_product_attention is called: forced backend and GQA handling."""

    def __init__(self, backend="auto", gqa_mode="none"):
        self.backend = backend      # flash | efficient | cudnn | math | auto
        self.gqa_mode = gqa_mode    # none | native (enable_gqa=True) | repeat (repeat_interleave)

    def context(self):
        if self.backend == "auto":
            return contextlib.nullcontext()
        from torch.nn.attention import SDPBackend, sdpa_kernel

        table = {
            "flash": SDPBackend.FLASH_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION,
            "cudnn": SDPBackend.CUDNN_ATTENTION,
            "math": SDPBackend.MATH,
        }
        return sdpa_kernel([table[self.backend]])


ATTN = AttentionConfig()


def sdpa(q, k, v):
    """q: [B, H, T, D]; k, v: [B, KVH, T, D]; causal."""
    if ATTN.gqa_mode == "native" and k.shape[1] != q.shape[1]:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    if k.shape[1] != q.shape[1]:
        rep = q.shape[1] // k.shape[1]
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


# ---------------------------------------------------------------------------
# GPT-2 / Megatron style
# ---------------------------------------------------------------------------
class GPTBlock(nn.Module):
    def __init__(self, hidden, heads, ffn_hidden):
        super().__init__()
        self.heads = heads
        self.head_dim = hidden // heads
        self.ln1 = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden, bias=True)
        self.proj = nn.Linear(hidden, hidden, bias=True)
        self.ln2 = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, ffn_hidden, bias=True)
        self.fc2 = nn.Linear(ffn_hidden, hidden, bias=True)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q = q.view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = k.view(b, t, self.heads, self.head_dim).transpose(1, 2)
        v = v.view(b, t, self.heads, self.head_dim).transpose(1, 2)
        y = sdpa(q, k, v)
        y = y.transpose(1, 2).reshape(b, t, c)
        x = x + self.proj(y)
        x = x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))
        return x


class GPT(nn.Module):
    def __init__(self, vocab, seq_len, hidden, layers, heads, ffn_hidden):
        super().__init__()
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(seq_len, hidden)
        self.blocks = nn.ModuleList([GPTBlock(hidden, heads, ffn_hidden) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(hidden)

    def forward(self, idx):
        t = idx.shape[1]
        pos = torch.arange(t, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for blk in self.blocks:
            x = blk(x)
        x = self.ln_f(x)
        return F.linear(x, self.wte.weight)  # tied output embedding

    def matmul_weight_params(self):
        n = sum(m.weight.numel() for m in self.modules() if isinstance(m, nn.Linear))
        return n + self.wte.weight.numel()  # the tied logits GEMM


# ---------------------------------------------------------------------------
# Llama style
# ---------------------------------------------------------------------------
class RMSNorm(nn.Module):
    """Fallback for PyTorch versions without nn.RMSNorm."""

    def __init__(self, hidden, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden))

    def forward(self, x):
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * self.weight).to(x.dtype)


def make_rmsnorm(hidden):
    if hasattr(nn, "RMSNorm"):
        return nn.RMSNorm(hidden, eps=1e-5)
    return RMSNorm(hidden, eps=1e-5)


def rope_tables(seq_len, head_dim, base=10000.0):
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    t = torch.arange(seq_len, dtype=torch.float32)
    freqs = torch.outer(t, inv_freq)  # [T, D/2]
    return torch.cos(freqs), torch.sin(freqs)


def apply_rope(x, cos, sin):
    """x: [B, H, T, D] (rotate-half convention); cos/sin: [T, D/2]."""
    d = x.shape[-1] // 2
    x1 = x[..., :d]
    x2 = x[..., d:]
    c = cos.to(x.dtype)
    s = sin.to(x.dtype)
    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)


class LlamaBlock(nn.Module):
    def __init__(self, hidden, heads, kv_heads, ffn_hidden):
        super().__init__()
        self.heads = heads
        self.kv_heads = kv_heads
        self.head_dim = hidden // heads
        self.norm1 = make_rmsnorm(hidden)
        self.wqkv = nn.Linear(hidden, (heads + 2 * kv_heads) * self.head_dim, bias=False)
        self.wo = nn.Linear(heads * self.head_dim, hidden, bias=False)
        self.norm2 = make_rmsnorm(hidden)
        self.w13 = nn.Linear(hidden, 2 * ffn_hidden, bias=False)  # gate and up, fused
        self.w2 = nn.Linear(ffn_hidden, hidden, bias=False)

    def forward(self, x, cos, sin):
        b, t, c = x.shape
        hd = self.head_dim
        qkv = self.wqkv(self.norm1(x))
        q, k, v = qkv.split([self.heads * hd, self.kv_heads * hd, self.kv_heads * hd], dim=2)
        q = q.view(b, t, self.heads, hd).transpose(1, 2)
        k = k.view(b, t, self.kv_heads, hd).transpose(1, 2)
        v = v.view(b, t, self.kv_heads, hd).transpose(1, 2)
        q = apply_rope(q, cos, sin)
        k = apply_rope(k, cos, sin)
        y = sdpa(q, k, v)
        y = y.transpose(1, 2).reshape(b, t, self.heads * hd)
        x = x + self.wo(y)
        gate, up = self.w13(self.norm2(x)).chunk(2, dim=-1)
        x = x + self.w2(F.silu(gate) * up)
        return x


class Llama(nn.Module):
    def __init__(self, vocab, seq_len, hidden, layers, heads, kv_heads, ffn_hidden):
        super().__init__()
        self.tok = nn.Embedding(vocab, hidden)
        self.blocks = nn.ModuleList(
            [LlamaBlock(hidden, heads, kv_heads, ffn_hidden) for _ in range(layers)]
        )
        self.norm = make_rmsnorm(hidden)
        self.head = nn.Linear(hidden, vocab, bias=False)  # untied
        cos, sin = rope_tables(seq_len, hidden // heads)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    def forward(self, idx):
        t = idx.shape[1]
        cos = self.rope_cos[:t]
        sin = self.rope_sin[:t]
        x = self.tok(idx)
        for blk in self.blocks:
            x = blk(x, cos, sin)
        return self.head(self.norm(x))

    def matmul_weight_params(self):
        return sum(m.weight.numel() for m in self.modules() if isinstance(m, nn.Linear))


def init_weights(model):
    for m in model.modules():
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------
def gpu_label(name):
    n = name.lower()
    if "h100" in n and ("hbm3" in n or "sxm" in n):
        return "h100-sxm5-80gb"
    if "h100" in n:
        return "h100-pcie-80gb"
    if "h200" in n:
        return "h200-sxm-141gb"
    if "a100" in n and "80" in n:
        return "a100-sxm4-80gb"
    return "".join(ch if ch.isalnum() else "-" for ch in n).strip("-")


def nvidia_smi_query(fields):
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=" + fields, "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20,
        )
        if out.returncode == 0:
            return out.stdout.strip().splitlines()[0].strip()
    except Exception:  # noqa: BLE001 - nvidia-smi is optional
        pass
    return None


def probe_attention(backend, gqa_mode, b, heads, kv_heads, t, hd, dtype):
    """Run one attention forward+backward with the given settings; return grad_fn name."""
    global ATTN
    saved = ATTN
    ATTN = AttentionConfig(backend, gqa_mode)
    try:
        q = torch.randn(b, heads, t, hd, device="cuda", dtype=dtype, requires_grad=True)
        k = torch.randn(b, kv_heads, t, hd, device="cuda", dtype=dtype, requires_grad=True)
        v = torch.randn(b, kv_heads, t, hd, device="cuda", dtype=dtype, requires_grad=True)
        with ATTN.context():
            out = sdpa(q, k, v)
        name = out.grad_fn.name() if out.grad_fn is not None else "none"
        out.float().sum().backward()
        torch.cuda.synchronize()
        if not torch.isfinite(q.grad).all():
            raise RuntimeError("non-finite gradient in attention probe")
        return name
    finally:
        ATTN = saved


def choose_attention(requested, b, heads, kv_heads, t, hd, dtype):
    gqa_modes = ["none"] if kv_heads == heads else ["native", "repeat"]
    backends = [requested] if requested == "auto" else [requested, "auto"]
    notes = []
    for be in backends:
        for gm in gqa_modes:
            try:
                grad_fn = probe_attention(be, gm, b, heads, kv_heads, t, hd, dtype)
                return AttentionConfig(be, gm), grad_fn, notes
            except Exception as e:  # noqa: BLE001 - try the next option
                notes.append("%s/%s failed: %s" % (be, gm, str(e).splitlines()[0][:200]))
                torch.cuda.synchronize()
    raise RuntimeError("no working attention configuration: " + "; ".join(notes))


def med(xs):
    return statistics.median(xs) if xs else None


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------
def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--family", choices=["gpt", "llama"], required=True)
    p.add_argument("--hidden", type=int, required=True)
    p.add_argument("--layers", type=int, required=True)
    p.add_argument("--heads", type=int, required=True)
    p.add_argument("--kv-heads", type=int, default=None, help="default: --heads")
    p.add_argument("--ffn-hidden", type=int, default=None,
                   help="default: 4*hidden (gpt), 256-multiple of 8/3*hidden (llama)")
    p.add_argument("--seq-len", type=int, default=1024)
    p.add_argument("--vocab", type=int, default=None, help="default: 50304 (gpt), 32000 (llama)")
    p.add_argument("--micro-batch", type=int, default=1)
    p.add_argument("--precision", choices=["amp-bf16", "fp32"], default="amp-bf16")
    p.add_argument("--optimizer", choices=["adam"], default="adam")
    p.add_argument("--steps", type=int, default=20, help="measured steps")
    p.add_argument("--warmup", type=int, default=10, help="un-timed warm-up steps")
    p.add_argument("--attention", choices=["flash", "efficient", "cudnn", "math", "auto"],
                   default="flash", help="SDPA backend to force (falls back to auto if unusable)")
    p.add_argument("--gpu-label", default=None, help="scenario.cluster.gpu (default: from device name)")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--name", default=None)
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    if a.kv_heads is None:
        a.kv_heads = a.heads
    if a.vocab is None:
        a.vocab = 50304 if a.family == "gpt" else 32000
    if a.ffn_hidden is None:
        if a.family == "gpt":
            a.ffn_hidden = 4 * a.hidden
        else:
            a.ffn_hidden = 256 * ((int(8 * a.hidden / 3) + 255) // 256)
    if a.hidden % a.heads != 0 or a.heads % a.kv_heads != 0:
        p.error("hidden must be divisible by heads and heads by kv-heads")
    if a.family == "gpt" and a.kv_heads != a.heads:
        p.error("gpt family uses multi-head attention (kv-heads == heads)")
    if a.name is None:
        a.name = "%s-h%d-l%d-s%d-mb%d" % (a.family, a.hidden, a.layers, a.seq_len, a.micro_batch)
    return a


def build_document(args, measured, env, error=None):
    doc = {
        "format": FORMAT,
        "name": args.name,
        "source": SOURCE,
        "scenario": {
            "model": {
                "family": args.family,
                "hidden": args.hidden,
                "layers": args.layers,
                "heads": args.heads,
                "kv_heads": args.kv_heads,
                "ffn_hidden": args.ffn_hidden,
                "seq_len": args.seq_len,
                "vocab": args.vocab,
            },
            "training": {
                "global_batch": args.micro_batch,
                "micro_batch": args.micro_batch,
                "precision": args.precision,
                "optimizer": args.optimizer,
                "recompute": "none",
            },
            "cluster": {"gpu": env.get("gpu_label"), "nodes": 1, "gpus_per_node": 1},
            "plan": {"dp": 1, "tp": 1, "pp": 1},
        },
        "measured": measured,
        "environment": env,
        "command_line": " ".join([os.path.basename(sys.executable)] + sys.argv),
    }
    if error is not None:
        doc["error"] = error
    return doc


def write_json(path, doc):
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def environment_info(args):
    name = torch.cuda.get_device_name(0)
    props = torch.cuda.get_device_properties(0)
    env = {
        "gpu": name,
        "gpu_label": args.gpu_label or gpu_label(name),
        "gpu_memory_bytes": int(props.total_memory),
        "sm_count": int(props.multi_processor_count),
        "driver": nvidia_smi_query("driver_version"),
        "gpu_clocks_max_sm_mem_mhz": nvidia_smi_query("clocks.max.sm,clocks.max.mem"),
        "gpu_power_limit": nvidia_smi_query("power.limit"),
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "hostname": socket.gethostname(),
        "date_utc": utc_now(),
        "execution": "eager (no torch.compile), no CUDA graphs",
        "matmul_allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
        "cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32),
        "pytorch_cuda_alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF"),
        "norm_impl": ("torch.nn.LayerNorm" if args.family == "gpt"
                      else ("torch.nn.RMSNorm" if hasattr(nn, "RMSNorm") else "hand-written RMSNorm")),
    }
    return env


def main(argv=None):
    global ATTN
    args = parse_args(argv)
    if not torch.cuda.is_available():
        print("CUDA is not available", file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(args.seed)
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)

    env = environment_info(args)
    measured = {}
    t_start = time.time()
    try:
        amp_dtype = torch.bfloat16 if args.precision == "amp-bf16" else torch.float32
        hd = args.hidden // args.heads

        # Attention backend (probe on the real shapes before building the model).
        ATTN, grad_fn, notes = choose_attention(
            args.attention, args.micro_batch, args.heads, args.kv_heads, args.seq_len, hd, amp_dtype
        )
        env["attention_kernel"] = "sdpa %s (%s), autograd node %s" % (
            ATTN.backend, "forced" if ATTN.backend != "auto" else "PyTorch's choice", grad_fn)
        env["attention_backend"] = ATTN.backend
        env["attention_gqa"] = ATTN.gqa_mode
        if notes:
            env["attention_notes"] = notes

        with torch.device(dev):
            if args.family == "gpt":
                model = GPT(args.vocab, args.seq_len, args.hidden, args.layers, args.heads, args.ffn_hidden)
            else:
                model = Llama(args.vocab, args.seq_len, args.hidden, args.layers, args.heads,
                              args.kv_heads, args.ffn_hidden)
        init_weights(model)
        model.train()
        n_params = sum(p.numel() for p in model.parameters())
        n_matmul = model.matmul_weight_params()

        try:
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), eps=1e-8,
                                    weight_decay=0.1, fused=True)
            env["optimizer_impl"] = "torch.optim.AdamW fused=True"
        except (TypeError, RuntimeError, ValueError) as e:
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), eps=1e-8,
                                    weight_decay=0.1, foreach=True)
            env["optimizer_impl"] = "torch.optim.AdamW foreach=True (fused unavailable: %s)" % e

        tokens = args.micro_batch * args.seq_len
        # A fresh random batch for every step (pre-generated on the GPU): with one repeated
        # batch the model memorises it within a few steps, and near-zero gradients can make
        # the backward pass unrealistically fast.
        g = torch.Generator(device=dev)
        g.manual_seed(args.seed)
        n_batches = args.warmup + args.steps
        all_idx = torch.randint(0, args.vocab, (n_batches, args.micro_batch, args.seq_len),
                                device=dev, generator=g)
        all_tgt = torch.randint(0, args.vocab, (n_batches, args.micro_batch, args.seq_len),
                                device=dev, generator=g)
        env["data"] = "uniform random token ids and targets, a fresh batch every step"

        if args.precision == "amp-bf16":
            def autocast():
                return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
        else:
            def autocast():
                return contextlib.nullcontext()

        def step(i, ev):
            idx = all_idx[i]
            tgt = all_tgt[i]
            if ev is not None:
                ev[0].record()
            with autocast(), ATTN.context():
                logits = model(idx)
                loss = F.cross_entropy(logits.view(-1, logits.size(-1)), tgt.reshape(-1))
            if ev is not None:
                ev[1].record()
            loss.backward()
            if ev is not None:
                ev[2].record()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if ev is not None:
                ev[3].record()
            return loss.detach()

        # Warm-up.
        first_loss = None
        for i in range(args.warmup):
            l = step(i, None)
            if i == 0:
                first_loss = float(l.float().item())
        torch.cuda.synchronize()
        static_mem = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()

        events = [[torch.cuda.Event(enable_timing=True) for _ in range(4)] for _ in range(args.steps)]
        torch.cuda.synchronize()
        w0 = time.perf_counter()
        last = None
        for i in range(args.steps):
            last = step(args.warmup + i, events[i])
        torch.cuda.synchronize()
        wall = time.perf_counter() - w0
        last_loss = float(last.float().item()) if last is not None else None

        fwd = [e[0].elapsed_time(e[1]) * 1e-3 for e in events]
        bwd = [e[1].elapsed_time(e[2]) * 1e-3 for e in events]
        opt_t = [e[2].elapsed_time(e[3]) * 1e-3 for e in events]
        stp = [e[0].elapsed_time(e[3]) * 1e-3 for e in events]
        step_med = med(stp)

        attn_flops = 12.0 * args.layers * args.seq_len * (args.heads * hd) * tokens
        model_flops = 6.0 * n_matmul * tokens + attn_flops
        measured = {
            "step_time_s": step_med,
            "forward_time_s": med(fwd),
            "backward_time_s": med(bwd),
            "optimizer_time_s": med(opt_t),
            "peak_memory_bytes": int(torch.cuda.max_memory_allocated()),
            "peak_reserved_bytes": int(torch.cuda.max_memory_reserved()),
            "static_memory_bytes": int(static_mem),
            "tokens_per_s": tokens / step_med,
            "parameters": int(n_params),
            "matmul_weight_parameters": int(n_matmul),
            "tokens_per_step": tokens,
            "steps_measured": args.steps,
            "warmup_steps": args.warmup,
            "step_times_s": stp,
            "forward_times_s": fwd,
            "backward_times_s": bwd,
            "optimizer_times_s": opt_t,
            "step_time_min_s": min(stp),
            "step_time_max_s": max(stp),
            "step_time_mean_s": sum(stp) / len(stp),
            "wall_time_per_step_s": wall / args.steps,
            "model_flops_per_step": model_flops,
            "model_flops_formula": "6 * matmul_weight_parameters * tokens + 12 * layers * seq_len * "
                                   "(heads * head_dim) * tokens (attention, no causal discount)",
            "model_tflops_per_s": model_flops / step_med / 1e12,
            "loss_first_warmup_step": first_loss,
            "loss_last_step": last_loss,
        }
        if not (last_loss is not None and math.isfinite(last_loss)):
            raise RuntimeError("non-finite loss %r" % last_loss)
        env["run_wall_time_s"] = time.time() - t_start
        write_json(args.out, build_document(args, measured, env))
        print("%-24s params %7.1fM  step %8.2f ms (fwd %7.2f, bwd %7.2f, opt %6.2f)  peak %6.2f GiB  "
              "%9.0f tok/s  %6.1f TFLOP/s  loss %s->%s" % (
                  args.name, n_params / 1e6, step_med * 1e3, med(fwd) * 1e3, med(bwd) * 1e3,
                  med(opt_t) * 1e3, measured["peak_memory_bytes"] / 2**30, measured["tokens_per_s"],
                  measured["model_tflops_per_s"], "%.3f" % first_loss if first_loss is not None else "-",
                  "%.3f" % last_loss))
        return 0
    except torch.cuda.OutOfMemoryError as e:
        err = {"type": "oom", "message": str(e).splitlines()[0][:500]}
        rc = 3
    except Exception as e:  # noqa: BLE001 - record any failure in the output
        err = {"type": type(e).__name__, "message": str(e)[:2000], "traceback": traceback.format_exc()[-4000:]}
        rc = 4
    env["run_wall_time_s"] = time.time() - t_start
    write_json(args.out, build_document(args, measured, env, error=err))
    print("%s FAILED: %s" % (args.name, err["message"]), file=sys.stderr)
    if "traceback" in err:
        print(err["traceback"], file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())

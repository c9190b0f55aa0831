#!/usr/bin/env python3
"""Host-side (CPU) dispatch cost of eager PyTorch, for clustersim's host timeline.

Measures how long the host thread takes to issue typical operations when the GPU work is tiny
(small tensors, so the GPU is never the bottleneck):
  ops      linear, layer_norm, rms_norm, gelu (tanh), add, mul, softmax, SDPA (causal),
           cross_entropy, embedding, and a bf16 cast, in fp32, in bf16 and in fp32 under
           torch.autocast(bf16), each without and with autograd recording (parameters that
           require grad);
  blocks   one GPT block and one Llama block (measure_train.py's), forward and forward+backward,
           fp32 and autocast bf16;
  dtensor  (2+ ranks) DTensor elementwise ops and a DTensor mm against plain tensors of the same
           local shape; an MLP with ColwiseParallel fc1 / RowwiseParallel fc2
           (parallelize_module) against the same plain MLP, forward and forward+backward;
  fsdp     (2+ ranks) forward+backward of a stack of L tiny Linear layers, each its own FSDP unit
           (FSDP1 without and with a bf16 MixedPrecision policy, FSDP2 fully_shard), DDP and plain,
           at two depths; the per-unit hook cost is the slope over L minus the plain model's.

Per case: warm-up, then `reps` repetitions of `n` back-to-back calls without synchronisation
(n chosen for ~target seconds a repetition, the same n on every rank where a case communicates).
host_per_call_s = time until the loop returns / n (the host's dispatch rate; the GPU queue never
fills since kernels are short); wall_per_call_s = the same including the final
torch.cuda.synchronize(). Medians over reps. After every case is timed, torch.profiler records
`profile_calls` calls of each (a profiler run slows a process's later launches, so no case is
timed after one):
CPU time of the top-level op per call (the profiler adds its own overhead, so this is an upper
bound), kernels and launch API calls per call, and GPU time per call.

  torchrun --standalone --nproc-per-node 2 calibration/training/measure_host.py --out host.json
  python3 calibration/training/measure_host.py --out host1.json        # one GPU: ops and blocks only

Rank 0 writes one "clustersim-host-dispatch/1" JSON document.
"""

import argparse
import contextlib
import copy
import datetime
import json
import os
import platform
import socket
import statistics
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

SOURCE = "calibration/training/measure_host.py"
DIST = False


def agree_max(n):
    """The largest n over ranks (cases that communicate must run the same number of calls)."""
    if not DIST:
        return n
    t = torch.tensor([n], device="cuda", dtype=torch.int64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return int(t.item())


def timeit(fn, target_s, reps, collective=False, min_n=10, max_n=5000):
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    est = (time.perf_counter() - t0) / 10
    n = max(min_n, min(max_n, int(target_s / max(est, 1e-7))))
    if collective:
        n = agree_max(n)
        dist.barrier()
    host, wall = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        host.append((t1 - t0) / n)
        wall.append((t2 - t0) / n)
    return {"host_per_call_s": statistics.median(host), "host_per_call_min_s": min(host),
            "wall_per_call_s": statistics.median(wall), "calls": n, "reps": reps}


def _attr(e, *names):
    for nm in names:
        v = getattr(e, nm, None)
        if v is not None:
            return v
    return 0


def profile(fn, calls):
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as tprofile
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with tprofile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    kernels = launches = 0
    dev_us = 0.0
    cpu_rows = []
    for e in prof.key_averages():
        key = e.key
        is_dev = "CUDA" in str(getattr(e, "device_type", "")) or "cuda" in str(getattr(e, "device_type", ""))
        if is_dev:
            kernels += e.count
            dev_us += _attr(e, "self_device_time_total", "self_cuda_time_total")
            continue
        if key.startswith(("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx",
                           "cudaGraphLaunch", "cudaMemcpyAsync", "cudaMemsetAsync")):
            launches += e.count
        if "Synchronize" in key or key.startswith("ProfilerStep"):
            continue
        cpu_rows.append((key, e.count, _attr(e, "cpu_time_total"), _attr(e, "self_cpu_time_total")))
    cpu_rows.sort(key=lambda r: -r[2])
    top = cpu_rows[0] if cpu_rows else ("", 0, 0, 0)
    return {
        "profile_calls": calls,
        "profiler_top_op": top[0],
        "profiler_top_op_cpu_per_call_s": top[2] * 1e-6 / calls,
        "kernels_per_call": kernels / calls,
        "launch_api_calls_per_call": launches / calls,
        "gpu_time_per_call_s": dev_us * 1e-6 / calls,
        "profiler_top": [{"key": k, "count": c, "cpu_time_total_s": t * 1e-6, "self_cpu_time_total_s": s * 1e-6}
                         for k, c, t, s in cpu_rows[:8]],
    }


# Profiles waiting for the profiling pass: torch.profiler leaves a process's later launches
# slower on the host (20-30 %, calibration/README.md "Host-side dispatch"), so every case is
# timed first and profiled only after the last timing (profile_pending).
_PENDING = []


def case(results, name, fn, args, ctx=None, collective=False, extra=None, **meta):
    """Times fn (inside ctx, entered once), records it and queues its profile; never raises.
    extra: optional (key, function of fn) run in the profiling pass, its result stored under key."""
    rec = {"case": name}
    rec.update(meta)
    try:
        with (ctx() if ctx else contextlib.nullcontext()):
            rec.update(timeit(fn, args.target_s, args.reps, collective=collective))
            grad = torch.is_grad_enabled()  # inside ctx: the mode the case ran in
            if collective:
                dist.barrier()
        if collective:
            dist.barrier()
        if not getattr(args, "time_only", False):
            _PENDING.append((rec, fn, ctx, collective, grad, extra))
    except Exception as e:  # noqa: BLE001 - record and go on
        rec["error"] = "%s: %s" % (type(e).__name__, str(e)[:500])
        rec["traceback"] = traceback.format_exc()[-1500:]
    results.append(rec)
    if args.rank == 0:
        if "error" in rec:
            print("%-46s ERROR %s" % (name, rec["error"][:200]), flush=True)
        else:
            print("%-46s host %8.2f us  wall %8.2f us" % (
                name, rec["host_per_call_s"] * 1e6, rec["wall_per_call_s"] * 1e6), flush=True)
    return rec


def profile_pending(args):
    """The profiling pass: every queued case in the order it was timed (the same on every rank,
    so collective cases stay matched), each inside its own context and grad mode."""
    global _PENDING
    pending, _PENDING = _PENDING, []
    for rec, fn, ctx, collective, grad, extra in pending:
        try:
            # The grad mode first: set_grad_enabled takes effect when constructed, and ctx may
            # set its own (no_grad cases) inside it.
            with torch.set_grad_enabled(grad), (ctx() if ctx else contextlib.nullcontext()):
                rec.update(profile(fn, args.profile_calls))
                if extra is not None:
                    rec[extra[0]] = extra[1](fn)
        except Exception as e:  # noqa: BLE001 - record and go on
            rec["profile_error"] = "%s: %s" % (type(e).__name__, str(e)[:500])
        finally:
            if collective:
                dist.barrier()  # the ranks stay matched case by case, a failed profile included
        if args.rank == 0:
            print("%-46s prof %8.2f us  kernels %5.1f  gpu %8.2f us%s" % (
                rec["case"], rec.get("profiler_top_op_cpu_per_call_s", float("nan")) * 1e6,
                rec.get("kernels_per_call", float("nan")), rec.get("gpu_time_per_call_s", float("nan")) * 1e6,
                ("  " + json.dumps(rec[extra[0]])) if extra is not None and extra[0] in rec else ""), flush=True)


def init_torchrun(args):
    """Under torchrun: this rank's GPU, the NCCL process group and a 1-D device mesh over
    every rank; sets DIST and args.rank. Returns (device, world size, mesh)."""
    global DIST
    from torch.distributed.device_mesh import init_device_mesh
    dev = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev)
    DIST = True
    world, args.rank = dist.get_world_size(), dist.get_rank()
    return dev, world, init_device_mesh("cuda", (world,))


def autocast_ctx():
    return torch.autocast(device_type="cuda", dtype=torch.bfloat16)


# ---------------------------------------------------------------------------
def op_cases(args, dev):
    res = []
    T, H, FF, HEADS, HD, V = 128, 256, 1024, 4, 64, 1024
    modes = [("fp32", torch.float32, None), ("bf16", torch.bfloat16, None),
             ("fp32-autocast-bf16", torch.float32, autocast_ctx)]
    for mode, dtype, ctx in modes:
        for grad in (False, True):
            def p(*shape, scale=0.02):
                return (torch.randn(*shape, device=dev, dtype=dtype) * scale).requires_grad_(grad)
            x = torch.randn(4, T // 4, H, device=dev, dtype=dtype)
            y = torch.randn_like(x)
            w1, b1 = p(FF, H), p(FF)
            g, b = p(H, scale=1.0), p(H)
            q = torch.randn(4, HEADS, T // 4, HD, device=dev, dtype=dtype)
            k, v = torch.randn_like(q), torch.randn_like(q)
            if grad:
                x.requires_grad_(True)
                q.requires_grad_(True)
            logits = torch.randn(T, V, device=dev, dtype=dtype, requires_grad=grad)
            tgt = torch.randint(0, V, (T,), device=dev)
            emb = p(V, H)
            idx = torch.randint(0, V, (4, T // 4), device=dev)
            ops = [
                ("linear", lambda: F.linear(x, w1, b1)),
                ("layer_norm", lambda: F.layer_norm(x, (H,), g, b)),
                ("gelu_tanh", lambda: F.gelu(x, approximate="tanh")),
                ("add", lambda: x + y),
                ("mul", lambda: x * y),
                ("softmax", lambda: torch.softmax(x, dim=-1)),
                ("sdpa_causal", lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)),
                ("cross_entropy", lambda: F.cross_entropy(logits, tgt)),
                ("embedding", lambda: F.embedding(idx, emb)),
                ("to_bf16", lambda: x.to(torch.bfloat16)),
            ]
            if hasattr(F, "rms_norm"):
                ops.insert(2, ("rms_norm", lambda: F.rms_norm(x, (H,), g)))
            for name, fn in ops:
                gm = "grad" if grad else "no_grad"
                gctx = contextlib.nullcontext if grad else torch.no_grad

                def both(ctx=ctx, gctx=gctx):
                    return _Both(ctx, gctx)
                case(res, "op %s %s %s" % (name, mode, gm), fn, args, ctx=both, op=name, mode=mode, autograd=grad,
                     shapes="x [4, %d, %d], linear weight [%d, %d], sdpa q/k/v [4, %d, %d, %d], logits [%d, %d]" % (
                         T // 4, H, FF, H, HEADS, T // 4, HD, T, V))
    return res


class _Both:
    """Enters an optional autocast context and a grad-mode context."""

    def __init__(self, ctx, gctx):
        self.a = ctx() if ctx else contextlib.nullcontext()
        self.g = gctx()

    def __enter__(self):
        self.a.__enter__()
        self.g.__enter__()

    def __exit__(self, *exc):
        self.g.__exit__(*exc)
        self.a.__exit__(*exc)
        return False


def block_cases(args, dev):
    res = []
    H, HEADS = 256, 4
    torch.manual_seed(0)
    with torch.device(dev):
        blocks = {"gpt_block": mt.GPTBlock(H, HEADS, 4 * H),
                  "llama_block": mt.LlamaBlock(H, HEADS, 2, 768)}
        cos, sin = mt.rope_tables(64, H // HEADS)
    cos, sin = cos.to(dev), sin.to(dev)
    mt.ATTN = mt.AttentionConfig("auto", "native")
    for name, blk in blocks.items():
        x = torch.randn(2, 32, H, device=dev)
        xg = x.clone().requires_grad_(True)
        if name == "gpt_block":
            run = blk
        else:
            def run(inp, blk=blk):
                return blk(inp, cos[:32], sin[:32])
        for mode, ctx in (("fp32", None), ("fp32-autocast-bf16", autocast_ctx)):
            def fwd(run=run):
                with torch.no_grad():
                    return run(x)

            def fwd_bwd(run=run):
                run(xg).float().sum().backward()
            case(res, "block %s fwd %s" % (name, mode), fwd, args, ctx=ctx, block=name, mode=mode, part="forward",
                 shapes="x [2, 32, %d]" % H)
            case(res, "block %s fwd+bwd %s" % (name, mode), fwd_bwd, args, ctx=ctx, block=name, mode=mode,
                 part="forward+backward", shapes="x [2, 32, %d]" % H)
    return res


class MLP(nn.Module):
    def __init__(self, h, f):
        super().__init__()
        self.fc1 = nn.Linear(h, f)
        self.fc2 = nn.Linear(f, h)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))


def dtensor_cases(args, dev, world):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    try:
        from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    except ImportError:
        from torch.distributed._tensor import Replicate, Shard, distribute_tensor
    res = []
    mesh = init_device_mesh("cuda", (world,))
    H, FF, T = 256, 1024, 128
    torch.manual_seed(0)
    a_full = torch.randn(T * world, H, device=dev)
    b_full = torch.randn(T * world, H, device=dev)
    w_full = torch.randn(H, H, device=dev)
    a = distribute_tensor(a_full, mesh, [Shard(0)])
    b = distribute_tensor(b_full, mesh, [Shard(0)])
    w = distribute_tensor(w_full, mesh, [Replicate()])
    al, bl = a.to_local(), b.to_local()
    ops = [("add", lambda: a + b, lambda: al + bl),
           ("mul", lambda: a * b, lambda: al * bl),
           ("gelu_tanh", lambda: F.gelu(a, approximate="tanh"), lambda: F.gelu(al, approximate="tanh")),
           ("mm_shard0_x_replicate", lambda: torch.mm(a, w), lambda: torch.mm(al, w_full))]
    for name, fd, fp in ops:
        with torch.no_grad():
            case(res, "dtensor op %s" % name, fd, args, collective=True, op=name, kind="dtensor",
                 shapes="[%d, %d] Shard(0) on %d ranks" % (T * world, H, world))
            case(res, "plain op %s" % name, fp, args, collective=True, op=name, kind="plain",
                 shapes="[%d, %d] (the DTensor's local shape)" % (T, H))
    with torch.no_grad():
        case(res, "dtensor redistribute Shard(0)->Replicate", lambda: a.redistribute(mesh, [Replicate()]), args,
             collective=True, op="redistribute_allgather", kind="dtensor")
    torch.manual_seed(1)
    plain = MLP(H, FF).to(dev)
    tpm = copy.deepcopy(plain)
    parallelize_module(tpm, mesh, {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()})
    x = torch.randn(4, 32, H, device=dev)
    for label, m in (("plain", plain), ("dtensor-tp", tpm)):
        for mode, ctx in (("fp32", None), ("fp32-autocast-bf16", autocast_ctx)):
            def fwd(m=m):
                with torch.no_grad():
                    return m(x)

            def fwd_bwd(m=m):
                m(x).float().sum().backward()
            case(res, "mlp %s fwd %s" % (label, mode), fwd, args, ctx=ctx, collective=True, model=label, mode=mode,
                 part="forward", shapes="x [4, 32, %d], fc1 %dx%d, fc2 %dx%d; tp %d" % (H, H, FF, FF, H, world))
            case(res, "mlp %s fwd+bwd %s" % (label, mode), fwd_bwd, args, ctx=ctx, collective=True, model=label,
                 mode=mode, part="forward+backward")
    return res


def fsdp_cases(args, dev, world, local_rank):
    res = []
    H = 256
    depths = (4, 16)
    x = torch.randn(8, H, device=dev)
    variants = ["plain", "ddp", "fsdp1", "fsdp1-bf16", "fsdp2"]
    for variant in variants:
        for L in depths:
            rec_meta = {"variant": variant, "layers": L, "units": L if variant.startswith("fsdp") else 0}
            try:
                torch.manual_seed(0)
                base = nn.Sequential(*[nn.Linear(H, H) for _ in range(L)]).to(dev)
                if variant == "plain":
                    m = base
                elif variant == "ddp":
                    m = nn.parallel.DistributedDataParallel(base, device_ids=[local_rank])
                elif variant.startswith("fsdp1"):
                    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
                    from torch.distributed.fsdp import MixedPrecision
                    from torch.distributed.fsdp.wrap import ModuleWrapPolicy
                    mp = MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) \
                        if variant.endswith("bf16") else None
                    m = FSDP(base, auto_wrap_policy=ModuleWrapPolicy({nn.Linear}), mixed_precision=mp,
                             device_id=dev, use_orig_params=False)
                else:
                    from torch.distributed.fsdp import fully_shard
                    for layer in base:
                        fully_shard(layer)
                    fully_shard(base)
                    m = base

                def step(m=m):
                    m(x).float().sum().backward()
                    m.zero_grad(set_to_none=True)
                collective = variant != "plain"
                case(res, "stack %s L=%d fwd+bwd" % (variant, L), step, args, collective=collective,
                     shapes="x [8, %d], %d x Linear(%d, %d), one FSDP unit each" % (H, L, H, H), **rec_meta)
            except Exception as e:  # noqa: BLE001
                res.append({"case": "stack %s L=%d fwd+bwd" % (variant, L), "error": "%s: %s" % (
                    type(e).__name__, str(e)[:500]), **rec_meta})
                if args.rank == 0:
                    print("stack %s L=%d ERROR %s" % (variant, L, e), flush=True)
    return res


def fsdp_slopes(res):
    """Per-unit cost: slope over depth, and the slope minus the plain model's (after profiling:
    the GPU slope reads the profile)."""
    depths = sorted({r["layers"] for r in res if "layers" in r})[:2]
    variants = list(dict.fromkeys(r["variant"] for r in res if "variant" in r))
    slopes = {}
    for variant in variants:
        t = {r["layers"]: r for r in res if r.get("variant") == variant and "error" not in r}
        if all(L in t for L in depths):
            d = depths[1] - depths[0]
            slopes[variant] = {
                "host_per_layer_s": (t[depths[1]]["host_per_call_s"] - t[depths[0]]["host_per_call_s"]) / d,
                "wall_per_layer_s": (t[depths[1]]["wall_per_call_s"] - t[depths[0]]["wall_per_call_s"]) / d,
                "gpu_per_layer_s": (t[depths[1]]["gpu_time_per_call_s"] - t[depths[0]]["gpu_time_per_call_s"]) / d
                if all("gpu_time_per_call_s" in t[L] for L in depths) else None,
            }
    if "plain" in slopes:
        for v, s in slopes.items():
            if v != "plain":
                s["host_overhead_per_unit_vs_plain_s"] = s["host_per_layer_s"] - slopes["plain"]["host_per_layer_s"]
                s["wall_overhead_per_unit_vs_plain_s"] = s["wall_per_layer_s"] - slopes["plain"]["wall_per_layer_s"]
    return slopes


def main(argv=None):
    global DIST
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--target-s", type=float, default=0.04, help="seconds a timed repetition lasts")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--profile-calls", type=int, default=30)
    p.add_argument("--sections", default="ops,blocks,dtensor,fsdp")
    p.add_argument("--time-only", action="store_true",
                   help="no torch.profiler at all (no kernel counts or GPU times); by default every case is "
                        "profiled after the last one is timed")
    args = p.parse_args(argv)
    sections = set(args.sections.split(","))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    dev = torch.device("cuda", local_rank)
    torch.cuda.set_device(dev)
    world = 1
    if "LOCAL_RANK" in os.environ:
        dist.init_process_group("nccl", device_id=dev)
        DIST = True
        world = dist.get_world_size()
    args.rank = dist.get_rank() if DIST else 0
    torch.backends.cuda.matmul.allow_tf32 = False
    t0 = time.time()
    doc = {"format": "clustersim-host-dispatch/1", "source": SOURCE,
           "units": "seconds per call (host_per_call_s: the host loop; wall_per_call_s: with the final sync)",
           "method": __doc__.split("Per case:")[1].split("  torchrun")[0].strip().replace("\n", " "),
           "environment": {
               "gpu": torch.cuda.get_device_name(dev), "torch": torch.__version__, "cuda": torch.version.cuda,
               "nccl": ".".join(str(v) for v in torch.cuda.nccl.version()), "python": platform.python_version(),
               "cpu": platform.processor() or platform.machine(), "cpu_count": os.cpu_count(),
               "hostname": socket.gethostname(), "world_size": world,
               "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
               "command_line": " ".join([os.path.basename(sys.executable)] + sys.argv),
               "nccl_nvls_enable": os.environ.get("NCCL_NVLS_ENABLE"),
               "target_s": args.target_s, "reps": args.reps, "reported_rank": 0}}
    try:
        cpu_model = ""
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu_model = line.split(":", 1)[1].strip()
                    break
        doc["environment"]["cpu_model"] = cpu_model
    except OSError:
        pass

    def save(complete):
        # Rewritten after every section, so a later hang keeps what was measured.
        doc["complete"] = complete
        doc["wall_time_s"] = time.time() - t0
        if args.rank == 0:
            tmp = args.out + ".tmp"
            with open(tmp, "w") as f:
                json.dump(doc, f, indent=1)
                f.write("\n")
            os.replace(tmp, args.out)

    if "ops" in sections:
        doc["ops"] = op_cases(args, dev)
        save(False)
    if "blocks" in sections:
        doc["blocks"] = block_cases(args, dev)
        save(False)
    if DIST and world > 1 and "dtensor" in sections:
        try:
            doc["dtensor"] = dtensor_cases(args, dev, world)
        except Exception as e:  # noqa: BLE001
            doc["dtensor_error"] = "%s: %s\n%s" % (type(e).__name__, e, traceback.format_exc()[-1500:])
        save(False)
    if DIST and world > 1 and "fsdp" in sections:
        try:
            doc["fsdp"] = fsdp_cases(args, dev, world, local_rank)
        except Exception as e:  # noqa: BLE001
            doc["fsdp_error"] = "%s: %s\n%s" % (type(e).__name__, e, traceback.format_exc()[-1500:])
    save(False)
    profile_pending(args)
    if "fsdp" in doc:
        doc["fsdp_per_unit"] = fsdp_slopes(doc["fsdp"])
    save(True)
    if args.rank == 0:
        print("wrote %s (%.0f s)" % (args.out, doc["wall_time_s"]), flush=True)
        for v, s in (doc.get("fsdp_per_unit") or {}).items():
            print("per layer %-11s host %8.2f us  wall %8.2f us  overhead vs plain host %s" % (
                v, s["host_per_layer_s"] * 1e6, s["wall_per_layer_s"] * 1e6,
                "%.2f us" % (s["host_overhead_per_unit_vs_plain_s"] * 1e6)
                if "host_overhead_per_unit_vs_plain_s" in s else "-"), flush=True)
    if DIST:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())

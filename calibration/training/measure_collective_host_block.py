#!/usr/bin/env python3
"""Does the host wait for the GPU at a collective? (clustersim's host-timeline rule)

Queues about G ms of GEMMs on the GPU, then issues one collective the way each framework
does, then a small op on its result, and records how long the host took to get past them
(perf_counter, no synchronisation) against the GPU time (after torch.cuda.synchronize()).
If the host returns in microseconds the collective is asynchronous for the host; if it
returns only after about G ms, the host waited for the GPU. Cases: plain
dist.all_reduce (as Megatron-style layers call it), the functional all_reduce with a use of
its result (wait_tensor), a DTensor Partial -> Replicate redistribute, a RowwiseParallel
Linear forward, and a ColwiseParallel Linear backward (its input-gradient all-reduce).
torchrun --standalone --nproc-per-node 2 measure_collective_host_block.py --out F
"""
import argparse, json, os, statistics, time
import torch, torch.distributed as dist, torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    args = p.parse_args()
    lr = int(os.environ["LOCAL_RANK"])
    dev = torch.device("cuda", lr)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev)
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cuda", (world,))
    try:
        from torch.distributed.tensor import DTensor, Partial, Replicate
    except ImportError:
        from torch.distributed._tensor import DTensor, Replicate
        from torch.distributed._tensor.placement_types import _Partial as Partial
    import torch.distributed._functional_collectives as funcol
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    N = 8192
    a = torch.randn(N, N, device=dev, dtype=torch.bfloat16)
    b = torch.randn(N, N, device=dev, dtype=torch.bfloat16)
    t = torch.randn(4096, 4096, device=dev)

    def queue(k):
        for _ in range(k):
            torch.mm(a, b)

    H = 4096
    row = nn.Linear(H, H, bias=False).to(dev)
    parallelize_module(row, mesh, RowwiseParallel())
    col = nn.Linear(H, H, bias=False).to(dev)
    parallelize_module(col, mesh, ColwiseParallel())
    xr = torch.randn(8, 2048, H // world, device=dev)
    xc = torch.randn(8, 2048, H, device=dev, requires_grad=True)

    def c_plain():
        dist.all_reduce(t)
        return t + 1

    def c_funcol():
        return funcol.all_reduce(t, "sum", mesh) + 1

    def c_dtensor():
        return DTensor.from_local(t, mesh, [Partial()]).redistribute(mesh, [Replicate()]).to_local() + 1

    def c_rowwise():
        return row(xr) + 1

    yc = [None]

    def prep_colwise():
        yc[0] = col(xc).float().sum()

    def c_colwise_bwd():
        yc[0].backward()
        return xc.grad + 1

    cases = {"plain dist.all_reduce": (c_plain, None), "funcol.all_reduce + use": (c_funcol, None),
             "DTensor Partial->Replicate + use": (c_dtensor, None), "RowwiseParallel forward + use": (c_rowwise, None),
             "ColwiseParallel backward + use of input grad": (c_colwise_bwd, prep_colwise)}
    out = {}
    for name, (fn, prep) in cases.items():
        for _ in range(3):
            if prep:
                prep()
            fn()
        torch.cuda.synchronize()
        dist.barrier()
        rows = []
        for k in (0, 40):
            host, gpu = [], []
            for _ in range(5):
                if prep:
                    prep()
                torch.cuda.synchronize()
                dist.barrier()
                t0 = time.perf_counter()
                queue(k)
                t1 = time.perf_counter()
                fn()
                t2 = time.perf_counter()
                torch.cuda.synchronize()
                t3 = time.perf_counter()
                host.append((t1 - t0, t2 - t1, t3 - t0))
            med = [statistics.median(h[i] for h in host) for i in range(3)]
            rows.append({"queued_gemms": k, "host_queue_s": med[0], "host_collective_s": med[1], "wall_s": med[2]})
        out[name] = rows
        if rank == 0:
            print("%-46s " % name + "  ".join("gemms %2d: queue %.2f ms, host through collective %.2f ms, wall %.2f ms" % (
                r["queued_gemms"], r["host_queue_s"] * 1e3, r["host_collective_s"] * 1e3, r["wall_s"] * 1e3) for r in rows), flush=True)
    if rank == 0:
        env = {"gpu": torch.cuda.get_device_name(dev), "torch": torch.__version__, "world_size": world,
               "nccl_nvls_enable": os.environ.get("NCCL_NVLS_ENABLE"),
               "env": {k: os.environ.get(k) for k in ("TORCH_NCCL_BLOCKING_WAIT", "TORCH_NCCL_ASYNC_ERROR_HANDLING",
                                                      "TORCH_NCCL_AVOID_RECORD_STREAMS", "CUDA_LAUNCH_BLOCKING")}}
        json.dump({"format": "clustersim-collective-host-block/1",
                   "source": "calibration/training/measure_collective_host_block.py", "environment": env,
                   "cases": out}, open(args.out, "w"), indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

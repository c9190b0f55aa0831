#!/usr/bin/env python3
"""The pieces of Transformer Engine's ring-exchange TP overlap, measured on one node's GPUs
(docs/tp-comm-overlap.md). One process drives every visible GPU (peer access over NVLink);
no Transformer Engine is needed, only what its ring exchange does:

  copy      neighbour copies by copy engine (a peer tensor.copy_, cudaMemcpyPeerAsync) of
            one shard, 2-64 MB: one GPU alone, and every GPU to its ring neighbour at once
            (the all-gather's steady state);
  gemm      the GEMM chunks a TP 4 layer runs (M = tokens / t rows of a shard) and the whole
            GEMM, bf16, alone;
  contended the same GEMMs while every GPU's copy engine streams shards to its neighbour
            (the HBM and L2 the copies share with the GEMM);
(The ring's overlap itself, t chunks with their copies across GPUs, needs every device's
streams on one timeline; it is left to a run under Transformer Engine.)

Shapes: Llama 3 70B (hidden 8192, QKV 10240 / t, FC1 2 x 28672 / t) and GPT-3 175B (hidden
12288, QKV 3 x 12288 / t, FC1 4 x 12288 / t) at 4096 and 2048 tokens per TP group.
Every timing: a 10 ms GPU spin on every device first, the timed work made to wait on its end
(so the host's enqueueing is not timed and the copies and the GEMM start together), CUDA events
on GPU 0's streams, median of 5 rounds.

  python3 calibration/training/measure_tp_overlap.py   (writes $OUT/tp-overlap.json)
"""
import datetime
import json
import os
import platform
import statistics

import torch

BF = torch.bfloat16
LAYERS = {
    "llama3-70b": {"hidden": 8192, "qkv": 10240, "fc1": 2 * 28672},
    "gpt3-175b": {"hidden": 12288, "qkv": 3 * 12288, "fc1": 4 * 12288},
}


SPIN_CYCLES = 20_000_000  # about 10 ms of GPU spin at 2 GHz: the host enqueues the timed work behind it


def spin_all(n):
    """A GPU spin on every device's current stream; the events mark its end. Work made to wait
    on them starts together, after the host has enqueued all of it (no host time is timed)."""
    evs = []
    for d in range(n):
        with torch.cuda.device(d):
            torch.cuda._sleep(SPIN_CYCLES)
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            evs.append(e)
    return evs


def sync_all(n):
    for d in range(n):
        torch.cuda.synchronize(d)


def peer_devices():
    """The visible GPUs, each checked to reach every other by peer access."""
    n = torch.cuda.device_count()
    for i in range(n):
        for j in range(n):
            if i != j and not torch.cuda.can_device_access_peer(i, j):
                raise SystemExit("GPU %d cannot reach GPU %d by peer access" % (i, j))
    return n, [torch.device("cuda", i) for i in range(n)]


def main():
    n, dev = peer_devices()
    copy_streams = [torch.cuda.Stream(device=d) for d in dev]
    recv_streams = [torch.cuda.Stream(device=d) for d in dev]

    def peer_copy(i, j, dst, src):
        # A peer copy_ runs on the source's current stream and synchronises with the
        # destination's current stream both ways: both are side streams here, so the copy
        # neither waits for nor holds up the GPUs' compute streams (as TE's send and receive
        # streams).
        with torch.cuda.stream(copy_streams[i]), torch.cuda.stream(recv_streams[j]):
            dst.copy_(src, non_blocking=True)
    out = {"copy": [], "gemm": []}
    # 1. Copy engine, neighbour copies: `reps` copies back to back on GPU 0's copy stream
    # (alone, or with every GPU copying to its neighbour at once), timed on that stream.
    def copies(src, dst, ring, reps):
        ts = []
        for _ in range(5):
            sync_all(n)
            evs = spin_all(n)
            senders = range(n) if ring else [0]
            for i in senders:
                copy_streams[i].wait_event(evs[i])
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record(copy_streams[0])
            for _ in range(reps):
                for i in senders:
                    peer_copy(i, (i + 1) % n, dst[(i + 1) % n], src[i])
            b.record(copy_streams[0])
            sync_all(n)
            ts.append(a.elapsed_time(b) / 1e3 / reps)
        return statistics.median(ts)

    for mb in (2, 4, 8, 16, 32, 64):
        nbytes = mb * 2**20
        src = [torch.empty(nbytes // 2, dtype=BF, device=d).normal_() for d in dev]
        dst = [torch.empty(nbytes // 2, dtype=BF, device=d) for d in dev]
        peer_copy(0, 1 % n, dst[1 % n], src[0])  # first use of the peer mapping
        t1, tr = copies(src, dst, False, 10), copies(src, dst, True, 10)
        r = dict(mb=mb, bytes=nbytes, one_s=t1, one_GBps=nbytes / t1 / 1e9, ring_s=tr, ring_GBps=nbytes / tr / 1e9)
        out["copy"].append(r)
        print(r, flush=True)
        del src, dst
    # 2-3. GEMMs alone and with every GPU's copy engine streaming to its neighbour: the copies
    # and the GEMM start together behind the spin; the copies last longer than the GEMM.
    t = n
    traffic = [torch.empty(64 * 2**20 // 2, dtype=BF, device=d).normal_() for d in dev]
    sink = [torch.empty_like(traffic[i]) for i in range(n)]
    per_copy = next(r["ring_s"] for r in out["copy"] if r["mb"] == 64)

    def gemm_time(fn, with_copies, whole):
        ts = []
        k = int(whole / per_copy) + 3 if with_copies else 0
        for _ in range(5):
            sync_all(n)
            evs = spin_all(n)
            for i in range(n if k else 0):
                copy_streams[i].wait_event(evs[i])
            for _ in range(k):
                for i in range(n):
                    peer_copy(i, (i + 1) % n, sink[(i + 1) % n], traffic[i])
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            sync_all(n)
            ts.append(a.elapsed_time(b) / 1e3)
        return statistics.median(ts), k

    for name, L in LAYERS.items():
        for tokens in (4096, 2048):
            shard_rows = tokens // t
            for gemm_name, n_out in (("qkv", L["qkv"] // t), ("fc1", L["fc1"] // t)):
                x = torch.randn(tokens, L["hidden"], dtype=BF, device=dev[0])
                w = torch.randn(L["hidden"], n_out, dtype=BF, device=dev[0])
                y = torch.empty(tokens, n_out, dtype=BF, device=dev[0])
                full = lambda: torch.matmul(x, w, out=y)  # noqa: E731
                part = lambda: torch.matmul(x[:shard_rows], w, out=y[:shard_rows])  # noqa: E731
                full()
                part()
                whole, _ = gemm_time(full, False, 0)
                chunk, _ = gemm_time(part, False, 0)
                whole_c, k_whole = gemm_time(full, True, whole)
                chunk_c, k_chunk = gemm_time(part, True, chunk)
                r = dict(model=name, tokens=tokens, gemm=gemm_name, tp=t, m=tokens, k=L["hidden"], n=n_out,
                         whole_s=whole, whole_tflops=2.0 * tokens * L["hidden"] * n_out / whole / 1e12,
                         chunk_rows=shard_rows, chunk_s=chunk, shard_bytes=shard_rows * L["hidden"] * 2,
                         whole_under_copies_s=whole_c, chunk_under_copies_s=chunk_c,
                         copies_per_gpu_whole=k_whole, copies_per_gpu_chunk=k_chunk)
                out["gemm"].append(r)
                print(r, flush=True)
                del x, w, y
                torch.cuda.empty_cache()
    write_results("clustersim-tp-overlap/1", "calibration/training/measure_tp_overlap.py", n, out, "tp-overlap.json")


def write_results(fmt, source, gpus, results, filename):
    """The results with the machine they ran on, as $OUT/filename."""
    p = torch.cuda.get_device_properties(0)
    doc = dict(format=fmt, source=source,
               environment=dict(gpu=p.name, gpus=gpus, sms=p.multi_processor_count, torch=torch.__version__,
                                cuda=torch.version.cuda, python=platform.python_version(),
                                date_utc=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")),
               results=results)
    with open(os.path.join(os.environ.get("OUT", "."), filename), "w") as f:
        json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()

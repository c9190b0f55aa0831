#!/usr/bin/env python3
"""Transformer Engine's ring-exchange all-gather + GEMM, end to end on one node's GPUs, against
the rule clustersim prices it with (strategies/rules.hpp ring_exchange_exposed;
docs/tp-comm-overlap.md). One process drives every visible GPU (peer access over NVLink); no
Transformer Engine is needed, only what its ring exchange does:

  every GPU k holds its shard of the layer's input in slot k of a gathered buffer; at step s
  (0 .. t-1) it runs the GEMM on slot (k - s) mod t on its compute stream while its copy stream
  sends that slot to GPU k + 1 by copy engine (a peer tensor.copy_, cudaMemcpyPeerAsync); the
  GEMM of step s waits for the copy that brought its slot (GPU k - 1's copy of step s - 1), the
  send of step s for the same arrival: the copies run back to back, each chunk waits only for
  its own shard.

Measured per shape (median of 5 rounds, RING_ROUNDS in the environment for more; every round behind a 10 ms GPU spin on every device so
that the host's enqueueing is not timed; CUDA events on GPU 0):
  ring        the overlapped all-gather + GEMM, first chunk to last
  copy_step   one ring step alone (every GPU sending one shard to its neighbour at once)
  chunk       one GEMM chunk alone (tokens / t rows)
  whole       the whole GEMM alone (tokens rows)
  serial      the t - 1 copy steps, then the whole GEMM (all-gather, then GEMM)
and the rule's time from the measured pieces, t chunk + (t - 1) max(0, copy_step - chunk).

Shapes: the column-parallel GEMMs after the all-gather at TP t = the visible GPUs, for Llama 3
70B (8,192 tokens a TP group: Megatron-Bridge's TP 4, micro-batch 1) and GPT-3 175B (2,048 and
4,096 tokens: NeMo's micro-batch 1 on 128 GPUs, 2 on 512); bf16, and fp8 (torch._scaled_mm,
e4m3, per-tensor scales) where the build has it.

  python3 calibration/training/measure_ring_exchange.py   (writes $OUT/ring-exchange.json)
"""
import json
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure_tp_overlap import peer_devices, spin_all, sync_all, write_results  # noqa: E402

BF = torch.bfloat16
SHAPES = [
    ("llama3-70b", 8192, 8192, {"qkv": 10240, "fc1": 2 * 28672}),
    ("gpt3-175b", 2048, 12288, {"qkv": 3 * 12288, "fc1": 4 * 12288}),
    ("gpt3-175b", 4096, 12288, {"qkv": 3 * 12288, "fc1": 4 * 12288}),
]
ROUNDS = int(os.environ.get("RING_ROUNDS", "5"))  # rounds per measurement (the median is kept)


def main():
    n, dev = peer_devices()
    if n < 2:
        raise SystemExit("needs at least 2 GPUs")
    comp = [torch.cuda.Stream(device=d) for d in dev]
    send = [torch.cuda.Stream(device=d) for d in dev]
    recv = [torch.cuda.Stream(device=d) for d in dev]
    t = n
    has_fp8 = hasattr(torch, "_scaled_mm") and hasattr(torch, "float8_e4m3fn")

    def timed(enqueue, rounds_out=None):
        """enqueue(start_events) returns (first, last) timing events on GPU 0; median seconds (every
        round's seconds appended to rounds_out when given)."""
        ts = []
        for _ in range(ROUNDS):
            sync_all(n)
            a, b = enqueue(spin_all(n))
            sync_all(n)
            ts.append(a.elapsed_time(b) / 1e3)
        if rounds_out is not None:
            rounds_out.extend(ts)
        return statistics.median(ts)

    def timing_pair(stream):
        """Two timing events, the first recorded on `stream` now."""
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(stream)
        return a, b

    def peer_copy(i, j, dst, src):
        with torch.cuda.stream(send[i]), torch.cuda.stream(recv[j]):
            dst.copy_(src, non_blocking=True)

    out = []
    for model, tokens, hidden, gemms in SHAPES:
        rows = tokens // t
        # The gathered input on every GPU (slot k holds GPU k's shard) and a receive target per slot.
        gathered = [torch.randn(tokens, hidden, dtype=BF, device=d) for d in dev]
        slots = [[g[s * rows:(s + 1) * rows] for s in range(t)] for g in gathered]
        for gemm_name, n_total in gemms.items():
            n_out = n_total // t
            for dtype in (["bf16", "fp8"] if has_fp8 else ["bf16"]):
                w = [torch.randn(hidden, n_out, dtype=BF, device=d) for d in dev]
                y = [torch.empty(tokens, n_out, dtype=BF, device=d) for d in dev]
                if dtype == "fp8":
                    xs8 = [g.to(torch.float8_e4m3fn) for g in gathered]
                    ws8 = [wi.t().contiguous().to(torch.float8_e4m3fn).t() for wi in w]  # column-major
                    one = [torch.ones((), device=d) for d in dev]

                    def gemm(k, lo, hi):
                        y[k][lo:hi] = torch._scaled_mm(xs8[k][lo:hi], ws8[k], scale_a=one[k], scale_b=one[k],
                                                       out_dtype=BF)
                else:
                    def gemm(k, lo, hi):
                        torch.matmul(gathered[k][lo:hi], w[k], out=y[k][lo:hi])
                for k in range(n):  # warm the kernels and the peer mappings
                    with torch.cuda.device(k), torch.cuda.stream(comp[k]):
                        gemm(k, 0, rows)
                        gemm(k, 0, tokens)
                    peer_copy(k, (k + 1) % n, slots[(k + 1) % n][k], slots[k][k])
                sync_all(n)

                def start(k, evs):
                    comp[k].wait_event(evs[k])
                    send[k].wait_event(evs[k])

                def ring(evs):
                    for k in range(n):
                        start(k, evs)
                    arrived = [[None] * t for _ in range(n)]  # arrived[k][s]: GPU k has its step-s slot
                    a, b = timing_pair(comp[0])
                    for s in range(t):
                        for k in range(n):
                            slot = (k - s) % t
                            with torch.cuda.device(k):
                                if s > 0:
                                    comp[k].wait_event(arrived[k][s])
                                with torch.cuda.stream(comp[k]):
                                    gemm(k, slot * rows, (slot + 1) * rows)
                            if s < t - 1:
                                j = (k + 1) % n
                                if s > 0:
                                    send[k].wait_event(arrived[k][s])
                                peer_copy(k, j, slots[j][slot], slots[k][slot])
                                e = torch.cuda.Event()
                                e.record(send[k])
                                arrived[j][s + 1] = e
                    b.record(comp[0])
                    return a, b

                def copy_step(evs):
                    for k in range(n):
                        start(k, evs)
                    a, b = timing_pair(send[0])
                    for k in range(n):
                        peer_copy(k, (k + 1) % n, slots[(k + 1) % n][k], slots[k][k])
                    b.record(send[0])
                    return a, b

                def alone(lo, hi):
                    def run(evs):
                        start(0, evs)
                        a, b = timing_pair(comp[0])
                        with torch.cuda.device(0), torch.cuda.stream(comp[0]):
                            gemm(0, lo, hi)
                        b.record(comp[0])
                        return a, b
                    return run

                def serial(evs):
                    for k in range(n):
                        start(k, evs)
                    a, b = timing_pair(send[0])
                    prev = [None] * n
                    for s in range(t - 1):
                        nxt = [None] * n
                        for k in range(n):
                            j = (k + 1) % n
                            slot = (k - s) % t
                            if prev[k] is not None:
                                send[k].wait_event(prev[k])
                            peer_copy(k, j, slots[j][slot], slots[k][slot])
                            e = torch.cuda.Event()
                            e.record(send[k])
                            nxt[j] = e
                        prev = nxt
                    comp[0].wait_event(prev[0])
                    with torch.cuda.device(0), torch.cuda.stream(comp[0]):
                        gemm(0, 0, tokens)
                    b.record(comp[0])
                    return a, b

                r = dict(model=model, tokens=tokens, gemm=gemm_name, dtype=dtype, tp=t, m=tokens, k=hidden, n=n_out,
                         shard_bytes=rows * hidden * 2)
                r["ring_rounds_s"] = []
                r["ring_s"] = timed(ring, r["ring_rounds_s"])
                r["copy_step_s"] = timed(copy_step)
                r["chunk_s"] = timed(alone(0, rows))
                r["whole_s"] = timed(alone(0, tokens))
                r["serial_s"] = timed(serial)
                x, g = r["copy_step_s"], r["chunk_s"]
                r["rule_s"] = t * g + (t - 1) * max(0.0, x - g)
                r["rule_error"] = r["rule_s"] / r["ring_s"] - 1
                r["exposed_measured_s"] = r["ring_s"] - t * g
                r["exposed_rule_s"] = (t - 1) * max(0.0, x - g)
                out.append(r)
                print(json.dumps(r), flush=True)
                del w, y
                if dtype == "fp8":
                    del xs8, ws8
                torch.cuda.empty_cache()
        del gathered, slots
        torch.cuda.empty_cache()
    write_results("clustersim-ring-exchange/1", "calibration/training/measure_ring_exchange.py", n, out,
                  "ring-exchange.json")


if __name__ == "__main__":
    main()

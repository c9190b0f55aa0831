#!/usr/bin/env python3
"""Prints the summary tables of the multi-GPU calibration data (issue 12) as Markdown.

  python3 calibration/summarize_multigpu.py calibration/data/h100-sxm5-80gb 2026-11-26 [--full]

Reads nccl-{2,4}gpu-DATE.json, nccl-extra-DATE.json, nccl-tree-DATE.json, overlap-DATE.json,
host-dispatch-DATE.json, multigpu-runs-DATE.json and multigpu-runs-mb1-call1-DATE.json (those
present). Only reads; the tables in calibration/README.md and calibration/nccl/README.md were
printed by this script.
"""
import json
import os
import statistics
import sys

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
FULL = "--full" in sys.argv  # also the per-case overlap table


def load(folder, name):
    p = os.path.join(folder, name)
    if not os.path.exists(p):
        return None
    with open(p) as f:
        return json.load(f)


def size_label(b):
    if b >= GIB:
        return "%g GiB" % (b / GIB)
    if b >= MIB:
        return "%g MiB" % (b / MIB)
    return "%g KiB" % (b / KIB)


def nearest(results, op, target):
    rows = [r for r in results if r["op"] == op]
    return min(rows, key=lambda r: abs(r["bytes"] - target)) if rows else None


def nccl_tables(folder, date):
    sizes = [KIB, 64 * KIB, MIB, 16 * MIB, 64 * MIB, 256 * MIB, GIB, 4 * GIB]
    ops = ["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv"]
    for n in (2, 4):
        doc = load(folder, "nccl-%dgpu-%s.json" % (n, date))
        if not doc:
            continue
        res = doc["runs"][0]["results"]
        print("\n**%d GPUs** (busbw in GB/s; the first column is the time of the smallest message)\n" % n)
        print("| op | time at 1 KiB (µs) | " + " | ".join(size_label(s) for s in sizes) + " |")
        print("|---|---:|" + "---:|" * len(sizes))
        for op in ops:
            cells = []
            for s in sizes:
                r = nearest(res, op, s)
                cells.append("%.1f" % (r["busbw_Bps"] / 1e9) if r and abs(r["bytes"] - s) <= s * 0.01 + 64 else "–")
            small = nearest(res, op, KIB)
            print("| %s | %.2f | %s |" % (op, small["time_s"] * 1e6, " | ".join(cells)))
    extra = load(folder, "nccl-extra-%s.json" % date)
    tree = load(folder, "nccl-tree-%s.json" % date)
    docs = (extra or {}).get("documents", []) + (tree or {}).get("documents", [])
    if docs:
        print("\n**Variants** (all-reduce busbw in GB/s; ungated = plain back-to-back launches from one thread)\n")
        print("| run | GPUs | time at 1 KiB (µs) | 64 KiB | 1 MiB | 64 MiB | 1 GiB | 4 GiB |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for d in docs:
            doc = d["document"]
            env = doc["provenance"]["environment"]
            label = d["file"].replace(".json", "")
            if env.get("NCCL_ALGO"):
                label += " (NCCL_ALGO=%s)" % env["NCCL_ALGO"]
            for run in doc["runs"]:
                res = run["results"]
                cells = []
                for s in (64 * KIB, MIB, 64 * MIB, GIB, 4 * GIB):
                    r = nearest(res, "all_reduce", s)
                    cells.append("%.1f" % (r["busbw_Bps"] / 1e9) if r and abs(r["bytes"] - s) <= s * 0.01 + 64 else "–")
                print("| %s | %d | %.2f | %s |" % (label, run["gpus"], nearest(res, "all_reduce", KIB)["time_s"] * 1e6,
                                                   " | ".join(cells)))


def overlap_tables(folder, date):
    doc = load(folder, "overlap-%s.json" % date)
    if not doc:
        return
    for run in doc["runs"]:
        n = run["gpus"]
        print("\n**%d GPUs**: alone, per call: " % n + "; ".join(
            "%s %.1f µs (%s)" % (c["compute"], c["time_s"] * 1e6,
                                 "%.0f TFLOP/s" % c["tflops"] if c["gemm"] else "%.0f GB/s r+w" % (c["bandwidth_rw_Bps"] / 1e9))
            for c in run["compute_alone"]) + "\n")
        print("Condensed: per compute kind and size, all-reduce / all-gather / reduce-scatter\n")
        print("| compute | size | compute slowdown (AR / AG / RS) | collective slowdown (AR / AG / RS) | overlap fraction (AR / AG / RS) |")
        print("|---|---:|---:|---:|---:|")
        kinds = []
        for o in run["overlap"]:
            if o["compute"] not in kinds:
                kinds.append(o["compute"])
        for kind in kinds:
            for size in sorted({o["bytes"] for o in run["overlap"]}):
                rows = {o["op"]: o for o in run["overlap"] if o["compute"] == kind and o["bytes"] == size}
                ops = [rows.get(k) for k in ("all_reduce", "all_gather", "reduce_scatter")]
                fmt = lambda key: " / ".join("%.2f" % (r[key] if key != "overlap" else r["paired"]["overlap_fraction"])
                                             if r else "–" for r in ops)
                cov = min(r["comm_coverage"] for r in ops if r)
                print("| %s | %s | %s | %s%s | %s |" % (
                    kind.replace("gemm_", "GEMM ").replace("copy_1073741824", "copy 1 GiB"), size_label(size),
                    fmt("compute_slowdown"), fmt("comm_slowdown"), " (coverage down to %.2f: lower bounds)" % cov if cov < 0.995 else "",
                    fmt("overlap")))
        if not FULL:
            g = [o for o in run["overlap"] if o["compute"].startswith("gemm")]
            c = [o for o in run["overlap"] if o["compute"].startswith("copy")]
            print_medians(n, g, c)
            continue
        print("\n| compute | collective | size | compute slowdown | comm slowdown (coverage) | comm busbw alone → overlapped (GB/s) | overlap fraction |")
        print("|---|---|---:|---:|---:|---:|---:|")
        for o in run["overlap"]:
            print("| %s | %s | %s | %.2f | %.2f (%.2f) | %.0f → %.0f | %.2f |" % (
                o["compute"].replace("gemm_", "gemm ").replace("copy_1073741824", "copy 1 GiB"), o["op"],
                size_label(o["bytes"]), o["compute_slowdown"], o["comm_slowdown"], o["comm_coverage"],
                o["comm_busbw_alone_Bps"] / 1e9, o["comm_busbw_overlapped_Bps"] / 1e9, o["paired"]["overlap_fraction"]))
        g = [o for o in run["overlap"] if o["compute"].startswith("gemm")]
        c = [o for o in run["overlap"] if o["compute"].startswith("copy")]
        print_medians(n, g, c)


def print_medians(n, g, c):
    if True:
        print("\nMedians (%d GPUs): GEMM slowdown %.2f (range %.2f–%.2f), collective slowdown under GEMM %.2f; "
              "copy slowdown %.2f, collective slowdown under copy %.2f; overlap fraction GEMM %.2f, copy %.2f." % (
                  n, statistics.median(o["compute_slowdown"] for o in g), min(o["compute_slowdown"] for o in g),
                  max(o["compute_slowdown"] for o in g), statistics.median(o["comm_slowdown"] for o in g),
                  statistics.median(o["compute_slowdown"] for o in c), statistics.median(o["comm_slowdown"] for o in c),
                  statistics.median(o["paired"]["overlap_fraction"] for o in g),
                  statistics.median(o["paired"]["overlap_fraction"] for o in c)))


def host_tables(folder, date):
    doc = load(folder, "host-dispatch-%s.json" % date)
    if not doc:
        return
    ops = {}
    for r in doc.get("ops", []):
        if "error" in r:
            continue
        ops[(r["op"], r["mode"], r["autograd"])] = r
    names = []
    for r in doc.get("ops", []):
        if r.get("op") and r["op"] not in names:
            names.append(r["op"])
    print("\n**Per op** (host µs per call, no_grad / grad; kernels per call in autocast with grad)\n")
    print("| op | fp32 | bf16 | fp32 + autocast bf16 | kernels (autocast, grad) |")
    print("|---|---:|---:|---:|---:|")
    for op in names:
        cells = []
        for mode in ("fp32", "bf16", "fp32-autocast-bf16"):
            a, b = ops.get((op, mode, False)), ops.get((op, mode, True))
            cells.append("%.1f / %.1f" % (a["host_per_call_s"] * 1e6 if a else float("nan"),
                                          b["host_per_call_s"] * 1e6 if b else float("nan")))
        k = ops.get((op, "fp32-autocast-bf16", True))
        print("| %s | %s | %.0f |" % (op, " | ".join(cells), k["kernels_per_call"] if k else float("nan")))
    if doc.get("blocks"):
        print("\n**Blocks** (x [2, 32, 256]; host µs per call, kernels, GPU µs)\n")
        print("| block | part | mode | host µs | kernels | GPU µs |")
        print("|---|---|---|---:|---:|---:|")
        for r in doc["blocks"]:
            if "error" not in r:
                print("| %s | %s | %s | %.0f | %.0f | %.0f |" % (r["block"], r["part"], r["mode"], r["host_per_call_s"] * 1e6,
                                                              r["kernels_per_call"], r["gpu_time_per_call_s"] * 1e6))
    if doc.get("dtensor"):
        print("\n**DTensor** (2 ranks; host µs per call)\n")
        print("| case | host µs | wall µs | kernels |")
        print("|---|---:|---:|---:|")
        for r in doc["dtensor"]:
            if "error" not in r:
                print("| %s | %.1f | %.1f | %.0f |" % (r["case"], r["host_per_call_s"] * 1e6, r["wall_per_call_s"] * 1e6,
                                                      r["kernels_per_call"]))
    if doc.get("fsdp_per_unit"):
        print("\n**Per layer of a stack of Linear(256, 256), forward+backward, 2 ranks** (slope between 4 and 16 layers)\n")
        print("| variant | host µs / layer | wall µs / layer | host overhead vs plain, µs / unit |")
        print("|---|---:|---:|---:|")
        for v, s in doc["fsdp_per_unit"].items():
            ov = s.get("host_overhead_per_unit_vs_plain_s")
            print("| %s | %.0f | %.0f | %s |" % (v, s["host_per_layer_s"] * 1e6, s["wall_per_layer_s"] * 1e6,
                                                "%.0f" % (ov * 1e6) if ov is not None else "–"))


def runs_table(folder, name):
    doc = load(folder, name)
    if not doc:
        return
    print("\n`%s`: %d runs, %d failed\n" % (name, len(doc["runs"]), len(doc["failed"])))
    print("| run | framework | GPUs | dp | tp | pp | M | mb | step ms (min–max) | fwd ms | bwd ms | opt ms | "
          "alloc GiB | reserved GiB | tokens/s | TFLOP/s per GPU |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for d in doc["runs"]:
        m, pl, tr = d["measured"], d["scenario"]["plan"], d["scenario"]["training"]
        gpus = d["scenario"]["cluster"]["gpus_per_node"]
        fw = tr["framework"]
        opts = tr.get("framework_options") or {}
        if fw == "pytorch-fsdp":
            fw += " %s/%s%s" % (opts.get("param_dtype"), opts.get("reduce_dtype"),
                                " (FSDP2)" if "FSDP2" in str(opts.get("implementation")) else "")
        f = lambda v: "%.1f" % (v * 1e3) if v is not None else "–"
        print("| %s | %s | %d | %d | %d | %d | %d | %d | %.1f (%.1f–%.1f) | %s | %s | %.1f | %.1f | %.1f | %.0f | %.0f |" % (
            d["name"], fw, gpus, pl["dp"], pl["tp"], pl["pp"], pl.get("micro_batches", 1), tr["micro_batch"],
            m["step_time_s"] * 1e3, m["step_time_min_s"] * 1e3, m["step_time_max_s"] * 1e3,
            f(m.get("forward_time_s")), f(m.get("backward_time_s")), m["optimizer_time_s"] * 1e3,
            m["peak_memory_bytes"] / GIB, m["peak_reserved_bytes"] / GIB, m["tokens_per_s"],
            m["model_tflops_per_s"] / gpus))
    for d in doc["failed"]:
        print("| %s | FAILED: %s |" % (d["name"], (d.get("error") or {}).get("message", "")[:120]))


def main():
    folder, date = [a for a in sys.argv[1:] if a != "--full"][:2]
    print("## NCCL")
    nccl_tables(folder, date)
    print("\n## Overlap")
    overlap_tables(folder, date)
    print("\n## Host dispatch")
    host_tables(folder, date)
    print("\n## Training runs")
    runs_table(folder, "multigpu-runs-%s.json" % date)
    runs_table(folder, "multigpu-runs-mb1-call1-%s.json" % date)


if __name__ == "__main__":
    main()

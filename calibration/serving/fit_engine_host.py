#!/usr/bin/env python3
"""Fits the per-iteration host cost of transformers' continuous-batching engine.

ENGINE.md section 6: an iteration is host(prepare) + max(host launch of the eager
forward, GPU) + host(update), nothing overlapped. The host parts have the terms the
engine's code has: a fixed part (scheduling, the eager forward's kernel launches,
sampling, tolist), a part per scheduled request (bookkeeping, three mask kernels), a
part per prefill token and a part per KV token read (one Python int per token for the
read index). This script fits, per model, by ordinary least squares (normal equations):
  prepare + update = a0 + a1 n_req + a2 prefill_tokens + a3 kv_read
  launch           = b0 + b1 n_req + b2 prefill_tokens + b3 kv_read
on the iterations of runs that `clustersim serve` does NOT replay (the 64-request probe
burst and the slow-mode lone request; the warm-up runs are left out, their first
iterations pay cuBLAS and kernel initialisation, ENGINE.md section 5), and reports the error on the iterations of the nine replayed
Poisson traces (held out). A term whose coefficient comes out negative is dropped and
the rest refitted (a negative cost per token has no physical meaning).

built_graph_launch_saving_s: the median launch of the slow lone request (single0, every
shape new) less that of the fast ones (single1/single2, which repeat single0's shapes, so
that cuDNN looks every SDPA graph up instead of building it): what a launch saves when its
attention shape was met before in the process.

The engine's fixed host cost is bimodal (README.md): in ~5 % of the iterations the
launch dropped to the single-threaded eager floor (12-14 ms 1B, 24-28 ms 8B). Those
iterations are excluded from the fit by a threshold halfway between the median launch
of the slow lone-request run (single0) and of the fast ones (single1, single2); how many
were excluded is written to the output. The simulator models the slow mode, which covers
~95 % of the loaded iterations.

launch_residual: the empirical distribution of the launch's residuals (measured - fitted)
over the fit iterations (slow mode, as fitted): quantiles at the probabilities
RESIDUAL_PROBABILITIES (0 to 1 by 0.02, then 0.99 and 0.995 to keep the tail; linear
interpolation between order statistics, numpy's default), with the runs and the count they
come from. The fit is a least-squares mean and the residuals are right-skewed (a few slow
launches of tens of ms, README.md "The worst figures"); `clustersim serve` draws one per
iteration (inverse CDF, linear between these quantiles) and adds it to the launch. The
prepare_update residuals are not written: their SD is 0.2-3.3 ms against 10-34 ms for the
launch (fit_error of the committed and the warm processes' calibrations).

gpu_bound_probe: the probe's decode iterations (no prefill) in the slow mode (a new shape:
cuDNN built its graph) whose host waited on the GPU after launching (sync_s > 2 ms): per
iteration [decodes, KV tokens read, launch + wait]. There the launch + wait is the GPU's idle
time during the graph build plus its work after it; the batch-time model subtracts its own GPU
time and takes the median as the process's graph-build stall (BatchTimeModel::
measured_graph_stall), measured under load and without a profiler.

Usage: fit_engine_host.py ITERATIONS_JSON OUT_JSON
Then engine_attention_path.py OUT_JSON adds the measured attention path to each model.
Standard library only.
"""
import datetime
import json
import statistics
import subprocess
import sys

TERMS = ["fixed_s", "per_request_s", "per_prefill_token_s", "per_kv_token_s"]
FIT_KINDS = ("probe", "single0")
GPU_WAIT_S = 0.002  # a host wait on the GPU above this: the iteration was GPU-bound
RESIDUAL_PROBABILITIES = [round(0.02 * k, 2) for k in range(50)] + [0.99, 0.995, 1.0]


def features(c, i):
    return [1.0, float(c["n_req"][i]), float(c["prefill_tokens"][i]), float(c["kv_read"][i])]


def solve(a, b):
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for col in range(n):
        piv = max(range(col, n), key=lambda r: abs(m[r][col]))
        m[col], m[piv] = m[piv], m[col]
        if abs(m[col][col]) < 1e-300:
            raise ValueError("singular normal equations")
        for r in range(n):
            if r != col:
                f = m[r][col] / m[col][col]
                for k in range(col, n + 1):
                    m[r][k] -= f * m[col][k]
    return [m[i][n] / m[i][i] for i in range(n)]


def lstsq(xs, ys, active):
    idx = [j for j in range(len(TERMS)) if active[j]]
    ata = [[sum(x[p] * x[q] for x in xs) for q in idx] for p in idx]
    aty = [sum(x[p] * y for x, y in zip(xs, ys)) for p in idx]
    sol = solve(ata, aty)
    coef = [0.0] * len(TERMS)
    for j, v in zip(idx, sol):
        coef[j] = v
    return coef


def fit(xs, ys):
    active = [True] * len(TERMS)
    while True:
        coef = lstsq(xs, ys, active)
        neg = [j for j in range(1, len(TERMS)) if active[j] and coef[j] < 0]
        if not neg:
            return coef, [TERMS[j] for j in range(len(TERMS)) if not active[j]]
        active[min(neg, key=lambda j: coef[j])] = False


def predict(coef, x):
    return sum(c * v for c, v in zip(coef, x))


def stats(coef, xs, ys):
    res = [predict(coef, x) - y for x, y in zip(xs, ys)]
    rel = sorted(abs(r) / y for r, y in zip(res, ys) if y > 0)
    return {
        "iterations": len(ys),
        "residual_sd_s": statistics.pstdev(res) if len(res) > 1 else 0.0,
        "mean_residual_s": statistics.fmean(res) if res else 0.0,
        "median_abs_rel_error": rel[len(rel) // 2] if rel else 0.0,
        "measured_mean_s": statistics.fmean(ys) if ys else 0.0,
    }


def quantile(sorted_values, p):
    pos = p * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (pos - lo) * (sorted_values[hi] - sorted_values[lo])


def residual_distribution(coef, xs, ys):
    res = sorted(y - predict(coef, x) for x, y in zip(xs, ys))
    return {
        "definition": "measured - fitted launch of the fit iterations (slow mode), seconds; quantiles by linear "
                      "interpolation between order statistics",
        "runs": list(FIT_KINDS),
        "iterations": len(res),
        "probabilities": RESIDUAL_PROBABILITIES,
        "quantiles_s": [quantile(res, p) for p in RESIDUAL_PROBABILITIES],
    }


def main():
    src, out = sys.argv[1], sys.argv[2]
    doc = json.load(open(src))
    result = {
        "format": "clustersim-serving-engine-host/1",
        "source": src,
        "fitted_by": "calibration/serving/fit_engine_host.py",
        "date": datetime.date.today().isoformat(),
        "git_revision": subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip(),
        "model": "prepare_update and launch, seconds per iteration = fixed_s + per_request_s * requests "
                 "+ per_prefill_token_s * prefill tokens + per_kv_token_s * KV tokens read",
        "fit_runs": list(FIT_KINDS),
        "held_out_runs": "every rate<i> run (the replayed Poisson traces)",
        "models": {},
    }
    for model in sorted({r["model"] for r in doc["runs"]}):
        runs = [r for r in doc["runs"] if r["model"] == model]
        med = {r["label"]: statistics.median(r["columns"]["launch_s"]) for r in runs if r["label"].startswith("single")}
        fast = statistics.fmean([med["single1"], med["single2"]])
        threshold = 0.5 * (med["single0"] + fast)
        sets = {"fit": ([], [], []), "held_out": ([], [], [])}
        excluded = {"fit": 0, "held_out": 0}
        total = {"fit": 0, "held_out": 0}
        for r in runs:
            kind = "fit" if r["label"] in FIT_KINDS else ("held_out" if r["label"].startswith("rate") else None)
            if kind is None:
                continue
            c = r["columns"]
            for i in range(len(c["t_s"])):
                total[kind] += 1
                if c["launch_s"][i] < threshold:
                    excluded[kind] += 1
                    continue
                x = features(c, i)
                sets[kind][0].append(x)
                sets[kind][1].append(c["prep_s"][i] + c["update_s"][i])
                sets[kind][2].append(c["launch_s"][i])
        gpu_bound = []
        for r in runs:
            if r["label"] != "probe":
                continue
            c = r["columns"]
            for i in range(1, len(c["t_s"])):
                if c["n_prefill"][i] == 0 and c["sync_s"][i] > GPU_WAIT_S and c["launch_s"][i] >= threshold:
                    gpu_bound.append([c["n_req"][i], c["kv_read"][i], c["launch_s"][i] + c["sync_s"][i]])
        xs, prep, launch = sets["fit"]
        cp, dp = fit(xs, prep)
        cl, dl = fit(xs, launch)
        hx, hp, hl = sets["held_out"]
        result["models"][model] = {
            # What a lone request's launch loses once cuDNN has built its attention graphs:
            # single1/single2 repeat single0's shapes exactly (every iteration a lookup).
            "built_graph_launch_saving_s": med["single0"] - fast,
            "prepare_update": dict(zip(TERMS, cp)),
            "launch": dict(zip(TERMS, cl)),
            "launch_residual": residual_distribution(cl, xs, launch),
            "gpu_bound_probe": {
                "definition": "the probe's decode iterations at a new shape (slow mode) whose host waited on the GPU "
                              "more than %g ms after launching: [decodes, KV tokens read, launch + wait seconds]"
                              % (GPU_WAIT_S * 1e3),
                "rows": gpu_bound,
            },
            "dropped_terms": {"prepare_update": dp, "launch": dl},
            "fast_mode_threshold_launch_s": threshold,
            "iterations": {k: {"total": total[k], "fast_mode_excluded": excluded[k]} for k in total},
            "fit_error": {"prepare_update": stats(cp, xs, prep), "launch": stats(cl, xs, launch)},
            "held_out_error": {"prepare_update": stats(cp, hx, hp), "launch": stats(cl, hx, hl)},
        }
    with open(out, "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()

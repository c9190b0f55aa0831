#!/usr/bin/env python3
"""Writes one clustersim scenario per run of a run_all.sh file (clustersim-measured-runs/1).

Each scenario is the run's own scenario block (model, training, cluster, plan as
measure_train.py recorded them) with what the block leaves to defaults spelled out as the
script ran it: SDPA's flash kernels (forced), no dropout, the GPT's tied embedding, and the
measured step and memory in the description.

  python3 calibration/training/single_gpu_scenarios.py RUNS.json OUTDIR PREFIX

PREFIX starts each scenario's name (e.g. measured-h200).
"""
import json
import os
import sys


def main():
    runs_path, outdir, prefix = sys.argv[1:4]
    with open(runs_path) as f:
        doc = json.load(f)
    os.makedirs(outdir, exist_ok=True)
    for run in doc["runs"]:
        sc, m, env = run["scenario"], run["measured"], run["environment"]
        model = dict(sc["model"])
        model.update({"attention": "flash", "dropout": 0.0, "tie_embeddings": model["family"] == "gpt"})
        training = {"attention_kernel": "flash2" if env.get("attention_backend") == "flash" else "auto"}
        training.update(sc["training"])
        out = {
            "name": "%s-%s" % (prefix, run["name"]),
            "description": "Trained on one %s by calibration/training/measure_train.py (PyTorch %s, autocast bf16, "
                           "fused AdamW, SDPA %s attention), %s; measured step %.2f ms, peak allocated %.2f GiB. "
                           "Measurements: %s." % (
                               env["gpu"], env["torch"], env.get("attention_backend", "auto"), env["date_utc"][:10],
                               m["step_time_s"] * 1e3, m["peak_memory_bytes"] / 2**30, runs_path),
            "model": model,
            "training": training,
            "cluster": sc["cluster"],
            "plan": sc["plan"],
            "simulation": {"collectives": "auto", "seed": 1},
        }
        with open(os.path.join(outdir, run["name"] + ".json"), "w") as f:
            json.dump(out, f, indent=2)
            f.write("\n")
    print("wrote %d scenarios into %s" % (len(doc["runs"]), outdir))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Rewrites measure_parallel.py's runs with scenario-valid blocks for clustersim.

measure_parallel.py records what the script ran: its framework name
("pytorch-tp-dtensor", "megatron-style-tp", "pipeline-1f1b", ...) and the framework's
knobs under training.framework_options, and plan.micro_batches. clustersim's scenario
schema names the framework a user runs (training.framework, see scenarios/README.md);
this script translates one into the other and leaves every measured figure untouched.

  python3 calibration/training/to_scenarios.py IN.json OUT.json

IN is a clustersim-measured-runs/1 file from run_multigpu.sh; OUT is the same runs with
their scenario blocks translated (a "derived_from" field names IN).
"""
import json
import sys


def framework(name, options):
    """The scenario's training.framework for a run of measure_parallel.py."""
    options = options or {}
    if name == "pytorch-ddp":
        return {"name": "pytorch-ddp", "bucket_cap": f"{options.get('bucket_cap_mb', 25)}MiB",
                "gradient_as_bucket_view": bool(options.get("gradient_as_bucket_view", False))}
    if name == "pytorch-fsdp":
        out = {"name": "pytorch-fsdp", "version": 2 if "FSDP2" in options.get("implementation", "") else 1}
        # FSDP1 without a MixedPrecision policy gathers and reduces in the storage type.
        if options.get("mixed_precision") or out["version"] == 2:
            out["param_dtype"] = options["param_dtype"]
            out["reduce_dtype"] = options["reduce_dtype"]
        return out
    if name == "pytorch-tp-dtensor":
        return "pytorch-tp"
    # Hand-written tensor parallelism and the 1F1B pipeline are eager PyTorch; their data
    # parallelism, when there is any, is DDP.
    if options.get("data_parallel") == "pytorch-ddp":
        return {"name": "pytorch-ddp", "bucket_cap": f"{options.get('bucket_cap_mb', 25)}MiB"}
    return "pytorch"


def translate(run):
    sc = run["scenario"]
    training = dict(sc["training"])
    name = training.pop("framework", None)
    options = training.pop("framework_options", None)
    if name is not None:
        training["framework"] = framework(name, options)
    plan = {k: v for k, v in sc["plan"].items() if k in ("dp", "tp", "pp", "zero", "schedule", "sequence_parallel")}
    model = dict(sc["model"])
    model.setdefault("attention", "flash")  # SDPA flash in every run
    model.setdefault("dropout", 0.0)
    out = dict(run)
    out["scenario"] = {"model": model, "training": training, "cluster": sc["cluster"], "plan": plan}
    # What the script recorded, as text (environment values are scalars).
    out["environment"] = dict(run.get("environment", {}), recorded_scenario=json.dumps(sc, sort_keys=True))
    # A figure the script could not measure (forward and backward of a pipeline stage
    # overlap) is null there; here it is left out.
    out["measured"] = {k: v for k, v in run["measured"].items() if v is not None}
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src = json.load(open(sys.argv[1]))
    if src.get("format") != "clustersim-measured-runs/1":
        sys.exit(f"{sys.argv[1]}: expected a clustersim-measured-runs/1 file")
    out = dict(src)
    out["derived_from"] = sys.argv[1]
    out["runs"] = [translate(r) for r in src["runs"]]
    with open(sys.argv[2], "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# Runs the measured multi-GPU training configurations (measure_parallel.py under torchrun:
# DDP and tensor-parallel GPT) on each GPU count and combines their JSON documents into one
# "clustersim-measured-runs/1" file.
#
# usage: calibration/training/run_parallel.sh COMBINED.json [PER_RUN_DIR]
# environment: GPU_COUNTS (default "2 4 8", capped by the GPUs present), WARMUP (10), STEPS (20),
#              ONLY (space-separated run names)
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0).
set -u -o pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
combined="${1:-measured_parallel_runs.json}"
rundir="${2:-$(mktemp -d /tmp/clustersim-par.XXXXXX)}"
mkdir -p "$rundir"
WARMUP="${WARMUP:-10}"
STEPS="${STEPS:-20}"
ONLY="${ONLY:-}"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
present=$(nvidia-smi -L | grep -c '^GPU')
GPU_COUNTS="${GPU_COUNTS:-2 4 8}"

names=()
failed=0
run() {
  local name="$1" n="$2" mode="$3"
  shift 3
  if [[ -n "$ONLY" && " $ONLY " != *" $name "* ]]; then return 0; fi
  names+=("$name")
  echo "=== $name: $mode on $n GPU(s): $*"
  local t0=$SECONDS
  if ! torchrun --standalone --nproc-per-node "$n" "$here/measure_parallel.py" --mode "$mode" --name "$name" \
      --out "$rundir/$name.json" --warmup "$WARMUP" --steps "$STEPS" --precision amp-bf16 --optimizer adam "$@"; then
    echo "!!! $name failed"
    failed=$((failed + 1))
  fi
  echo "    ($((SECONDS - t0)) s)"
}

for n in $GPU_COUNTS; do
  if (( n > present )); then echo "skipping $n GPUs: $present present"; continue; fi
  # Data parallel: the per-GPU batch of the single-GPU runs (run_all.sh), so the gradient
  # all-reduce is what changes.
  run "ddp${n}-gpt-350m-s1024-mb16" "$n" ddp --family gpt --hidden 1024 --layers 24 --heads 16 --seq-len 1024 --micro-batch 16
  run "ddp${n}-gpt-1.3b-s2048-mb4" "$n" ddp --family gpt --hidden 2048 --layers 24 --heads 16 --seq-len 2048 --micro-batch 4
  run "ddp${n}-llama-1.1b-s2048-mb4" "$n" ddp --family llama --hidden 2048 --layers 22 --heads 32 --kv-heads 4 --ffn-hidden 5632 --seq-len 2048 --micro-batch 4
  # Tensor parallel: heads, ffn and vocab divisible by 8.
  run "tp${n}-gpt-1.3b-s2048-mb4" "$n" tp --family gpt --hidden 2048 --layers 24 --heads 16 --seq-len 2048 --micro-batch 4
  run "tp${n}-gpt-2.7b-s2048-mb2" "$n" tp --family gpt --hidden 2560 --layers 32 --heads 32 --seq-len 2048 --micro-batch 2
  run "tp${n}-gpt-6.7b-s2048-mb1" "$n" tp --family gpt --hidden 4096 --layers 32 --heads 32 --seq-len 2048 --micro-batch 1
done

files=()
for n in "${names[@]}"; do [[ -f "$rundir/$n.json" ]] && files+=("$rundir/$n.json"); done
python3 - "$combined" "${files[@]}" <<'PY'
import json, sys
out, paths = sys.argv[1], sys.argv[2:]
runs, failed = [], []
for p in paths:
    with open(p) as f:
        d = json.load(f)
    (failed if "error" in d else runs).append(d)
doc = {"format": "clustersim-measured-runs/1", "source": "calibration/training/run_parallel.sh",
       "runs": runs, "failed": [{"name": d.get("name"), "error": d.get("error")} for d in failed]}
with open(out, "w") as f:
    json.dump(doc, f, indent=1)
    f.write("\n")
print("\n%-28s %3s %3s %9s %8s %8s %7s %8s %9s %7s" % (
    "name", "dp", "tp", "step_ms", "fwd_ms", "bwd_ms", "opt_ms", "peak_GiB", "tok/s", "TFLOP/s"))
for d in runs:
    m, pl = d["measured"], d["scenario"]["plan"]
    print("%-28s %3d %3d %9.2f %8.2f %8.2f %7.2f %8.2f %9.0f %7.1f" % (
        d["name"], pl["dp"], pl["tp"], m["step_time_s"] * 1e3, m["forward_time_s"] * 1e3,
        m["backward_time_s"] * 1e3, m["optimizer_time_s"] * 1e3, m["peak_memory_bytes"] / 2**30,
        m["tokens_per_s"], m["model_tflops_per_s"]))
for d in failed:
    print("FAILED %s: %s" % (d.get("name"), (d.get("error") or {}).get("message", "")[:300]))
print("wrote %s (%d runs, %d failed)" % (out, len(runs), len(failed)))
PY
(( failed == 0 ))

#!/usr/bin/env bash
# Runs the set of measured single-GPU training configurations (measure_train.py), one process
# each, and combines their JSON documents into one file.
#
# usage: calibration/training/run_all.sh COMBINED.json [PER_RUN_DIR]
#   COMBINED.json  output: {"format": "clustersim-measured-runs/1", "runs": [...], "failed": [...]}
#   PER_RUN_DIR    where each run's own JSON goes (default: a new folder under /tmp)
# environment: WARMUP (default 10), STEPS (default 20), ONLY (space-separated run names to run)
#
# Sized for one 80 GB GPU (H100 SXM5): amp-bf16, AdamW fused, no recompute, no TF32.
set -u -o pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
combined="${1:-measured_runs.json}"
rundir="${2:-$(mktemp -d /tmp/clustersim-runs.XXXXXX)}"
mkdir -p "$rundir"
WARMUP="${WARMUP:-10}"
STEPS="${STEPS:-20}"
ONLY="${ONLY:-}"
export PYTHONUNBUFFERED=1

names=()
failed=0
run() {
  local name="$1"
  shift
  if [[ -n "$ONLY" && " $ONLY " != *" $name "* ]]; then
    return 0
  fi
  names+=("$name")
  echo "=== $name: $*"
  local t0=$SECONDS
  if ! python3 "$here/measure_train.py" --name "$name" --out "$rundir/$name.json" \
      --warmup "$WARMUP" --steps "$STEPS" --precision amp-bf16 --optimizer adam "$@"; then
    echo "!!! $name failed"
    failed=$((failed + 1))
  fi
  echo "    ($((SECONDS - t0)) s)"
}

# GPT-2 / Megatron style (vocab 50304, tied embeddings, learned positions, GELU MLP 4h)
run gpt-125m-s1024-mb16  --family gpt --hidden 768  --layers 12 --heads 12 --seq-len 1024 --micro-batch 16
run gpt-350m-s1024-mb16  --family gpt --hidden 1024 --layers 24 --heads 16 --seq-len 1024 --micro-batch 16
run gpt-350m-s2048-mb8   --family gpt --hidden 1024 --layers 24 --heads 16 --seq-len 2048 --micro-batch 8
run gpt-760m-s1024-mb8   --family gpt --hidden 1536 --layers 24 --heads 16 --seq-len 1024 --micro-batch 8
run gpt-1.3b-s2048-mb4   --family gpt --hidden 2048 --layers 24 --heads 16 --seq-len 2048 --micro-batch 4
run gpt-2.7b-s2048-mb1   --family gpt --hidden 2560 --layers 32 --heads 32 --seq-len 2048 --micro-batch 1
run gpt-2.7b-s2048-mb2   --family gpt --hidden 2560 --layers 32 --heads 32 --seq-len 2048 --micro-batch 2
# Llama style (vocab 32000, RMSNorm, RoPE, GQA, SwiGLU, untied head)
run llama-420m-s2048-mb8 --family llama --hidden 1024 --layers 32 --heads 16 --kv-heads 4 --ffn-hidden 2816 --seq-len 2048 --micro-batch 8
run llama-1.1b-s2048-mb4 --family llama --hidden 2048 --layers 22 --heads 32 --kv-heads 4 --ffn-hidden 5632 --seq-len 2048 --micro-batch 4
run llama-2.4b-s2048-mb2 --family llama --hidden 2560 --layers 32 --heads 32 --kv-heads 8 --ffn-hidden 6912 --seq-len 2048 --micro-batch 2

files=()
for n in "${names[@]}"; do
  [[ -f "$rundir/$n.json" ]] && files+=("$rundir/$n.json")
done

python3 - "$combined" "${files[@]}" <<'EOF'
import json, sys
out, paths = sys.argv[1], sys.argv[2:]
runs, failed = [], []
for p in paths:
    with open(p) as f:
        d = json.load(f)
    (failed if "error" in d else runs).append(d)
doc = {"format": "clustersim-measured-runs/1",
       "source": "calibration/training/run_all.sh",
       "runs": runs,
       "failed": [{"name": d.get("name"), "error": d.get("error")} for d in failed]}
with open(out, "w") as f:
    json.dump(doc, f, indent=1)
    f.write("\n")
print("\n%-22s %8s %4s %5s %9s %8s %8s %7s %8s %9s %7s" % (
    "name", "params_M", "mb", "seq", "step_ms", "fwd_ms", "bwd_ms", "opt_ms", "peak_GiB", "tok/s", "TFLOP/s"))
for d in runs:
    m, s = d["measured"], d["scenario"]
    print("%-22s %8.1f %4d %5d %9.2f %8.2f %8.2f %7.2f %8.2f %9.0f %7.1f" % (
        d["name"], m["parameters"] / 1e6, s["training"]["micro_batch"], s["model"]["seq_len"],
        m["step_time_s"] * 1e3, m["forward_time_s"] * 1e3, m["backward_time_s"] * 1e3,
        m["optimizer_time_s"] * 1e3, m["peak_memory_bytes"] / 2**30, m["tokens_per_s"],
        m["model_tflops_per_s"]))
for d in failed:
    print("FAILED %s: %s" % (d.get("name"), (d.get("error") or {}).get("message", "")[:300]))
print("wrote %s (%d runs, %d failed)" % (out, len(runs), len(failed)))
EOF

if [[ $failed -ne 0 ]]; then
  echo "$failed run(s) failed"
  exit 1
fi
exit 0
